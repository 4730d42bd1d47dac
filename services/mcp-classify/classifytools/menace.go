package classifytools

import (
	"regexp"
	"strings"
	"unicode"
)

// menace scores a threat by combining cues instead of matching a whole phrasing: a harm that
// befalls the addressee or what is theirs, and how it is put to them (future, condition, a time
// limit, a prediction, an oath, a rhetorical question). A harm alone is a story and a framing
// alone is ordinary speech; together they are menace, in whatever order and words they come.
//
// Two kinds of line share those cues and are not threats (testdata/moderation/outside/GUIDE.md):
// a warning of an in-world danger, whose agent is the danger ("the wolves will tear you apart if
// you go north"), and fictional combat or game banter ("in the next duel I'll finish you").
// The first scores nothing unless the speaker or another person is the agent; the second takes
// points off the category unless a real-world cue (home, work, hospital, family) is present.
//
// judged is the folded, accent-stripped, lower-case text (folded: the same through fold, for the
// prefilters), sofar what the category scored before. The result is a multiple of the pattern's
// weight: 1 for a threat, 0 when no cue combination is found, negative for banter.
func menace(judged, folded string, sofar float64) float64 {
	c := &menaceCues
	if sofar <= 0 && !addressed(judged) {
		return 0 // nobody is addressed: no harm to the addressee, nothing to take off
	}
	harm := 0.0
	switch {
	case c.harm.match(judged, folded) || (c.harmToYours.match(judged, folded) && c.yours.match(judged, folded)):
		harm = 0.6
	case c.weakHarm.match(judged, folded):
		harm = 0.3
	}
	if harm == 0 && sofar <= 0 {
		return 0 // nothing to add and nothing to take off: most lines end here
	}
	game := c.game.match(judged, folded) || c.foe.match(judged, folded)
	if !game && harm == 0 {
		return 0
	}
	real := c.anchor.match(judged, folded)
	if game && !real {
		return -0.5
	}
	if harm == 0 {
		return 0
	}
	if c.hazard.match(judged, folded) && !c.agent.match(judged, folded) {
		return 0 // a warning: the danger is the agent
	}
	if c.reported.match(judged, folded) {
		return 0 // someone in the story says it: a prophecy, a healer's word, a herald's call
	}
	score := harm
	if c.frame.match(judged, folded) || contraction.MatchString(judged) {
		score += 0.4
	}
	if c.oath.match(judged, folded) {
		score += 0.4
	}
	if c.question.match(judged, folded) {
		score += 0.2
	}
	if real {
		score += 0.3
	}
	if score >= 1 {
		return 1
	}
	return 0
}

// secondPerson are the words that address someone, in the six languages.
var secondPerson = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`you your yours yourself ya u ur yall
		du dich dir dein deine deinen deinem deiner deines euch euer eure
		tu te toi ton ta tes t vous votre vos
		ti tus tuyo tuya usted
		tuo tua tuoi tue
		voce vc seu sua seus suas teu teus tuas`) {
		secondPerson[w] = true
	}
}

// addressed reports whether a lower-case text has a word that addresses someone.
func addressed(s string) bool {
	start := -1
	for i, r := range s {
		if unicode.IsLetter(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && secondPerson[s[start:i]] {
			return true
		}
		start = -1
	}
	return start >= 0 && secondPerson[s[start:]]
}

// A cue is a set of regular expressions, each with the prefilter that spares running it on
// most texts: a line costs a few substring searches unless it holds a cue's words.
type cue []alternative

type alternative struct {
	re  *regexp.Regexp
	pre prefilter
}

func newCue(exprs ...string) cue {
	c := make(cue, len(exprs))
	for i, e := range exprs {
		c[i] = alternative{re: regexp.MustCompile(e), pre: newPrefilter(e)}
	}
	return c
}

// match reports whether s (lower-case; folded is fold(s)) matches one of the cue's expressions.
func (c cue) match(s, folded string) bool {
	for _, a := range c {
		if a.pre.admits(folded) && a.re.MatchString(s) {
			return true
		}
	}
	return false
}

// contraction finds "you'll", "I'd": a future or conditional in a contracted form.
var contraction = regexp.MustCompile(`\pL'(?:ll|d)\b`)

type cueSet struct {
	harm, harmToYours, yours, weakHarm, frame, oath, question, anchor, hazard, agent, reported, game, foe cue
}

// words builds a cue matching any of the alternatives as whole words (Unicode-aware: the
// boundaries are not letters or digits) in lower-case text.
func words(alts ...string) cue {
	exprs := make([]string, len(alts))
	for i, a := range alts {
		exprs[i] = `(?:^|[^\pL\pN'])(?:` + a + `)(?:$|[^\pL\pN])`
	}
	return newCue(exprs...)
}

// The cue lexicons, English first, then German, French, Spanish, Italian and Portuguese. They
// are written without accents (the text is accent-stripped) and lower-case.
var menaceCues = cueSet{
	// A harm that befalls the addressee: the act done to them or the state they end in.
	harm: words(
		`(?:hurt|harm|beat|cripple|maim) (?:you|ya|u)(?: up)? (?:very |really |so )?badly`, `cripple (?:you|ya|u)`,
		`(?:break|smash|snap|crush|cut off|kick in|knock out|bash in|shatter) (?:your|ur|ya) (?:\pL+ ){0,2}(?:fingers?|legs?|arms?|knees?|kneecaps?|teeth|jaw|nose|face|skull|neck|ribs|hands?|bones|spine)`,
		`(?:you|ya|u)(?:'ll|'re| will| are| are going to|'re going to|'re gonna| gonna)? (?:be |end up |wake up |land )?(?:lying )?(?:in|into|on) (?:a |the )?hospital`,
		`(?:you|ya|u)(?:'ll|'re| will| are| are going to|'re going to|'re gonna| gonna)? (?:be |end up |wake up |land )?(?:lying )?(?:in|into|on) (?:a |the )?(?:wheelchair|ditch|body bag|coffin|morgue|grave|ambulance|stretcher)`,
		`(?:you|ya|u)(?:'ll|'re| will| are| are going to|'re going to|'re gonna| gonna)? (?:be |end up |wake up |land )?(?:lying )?in (?:the )?(?:icu|intensive care)`,
		`(?:eating|eat|drinking|drink|breathing) through a (?:straw|tube)`,
		`teeth (?:kicked|knocked|smashed|punched) (?:out|in)`,
		`(?:you|ya|u) (?:won't|will not|wont|aren't going to|will never) (?:be walking|walk again|walk straight|see (?:tomorrow|the morning|another day|daylight))`,
		`(?:painful|bloody|short) (?:evening|night|day|weekend|life|end) for (?:you|ya|u)`,
		`with (?:my|our) (?:bare )?(?:fists|boots|knuckles)`,
		`(?:you're|you are|you'll be|ur) next`,
		`snitches get stitches`,
		`(?:won't|will not|wont) (?:even )?recogni[sz]e (?:you|your face)`,
		// German
		`(?:du|dich) (?:\pL+ ){0,3}(?:im|ins) (?:krankenhaus|rollstuhl|grab|sarg|leichensack|koma)`,
		`(?:du wirst|wirst du) (?:\pL+ ){0,2}nicht (?:uberleben|mehr laufen|mehr aufwachen)`,
		`gnade dir gott`,
		`erkennt dich (?:\pL+ ){0,4}nicht mehr`,
		`(?:brech|breche|brechen|schlag|schlage) (?:ich )?dir (?:\pL+ ){0,2}(?:finger|beine|knochen|arme|kiefer|nase|rippen)`,
		`(?:reiss|reisse|reissen|zerreissen|zerfetzen) (?:\pL+ ){0,2}dich (?:\pL+ ){0,2}(?:in stucke|in fetzen)`,
		// French, Spanish, Italian, Portuguese
		`(?:a|dans) (?:l'hopital|un fauteuil roulant|le coma)`, `te (?:devorer|dechiqueter|mettre en pieces)`,
		`(?:en el|al) hospital`, `(?:en )?(?:una )?silla de ruedas`, `(?:in|all') ?ospedale`, `(?:su|in) una sedia a rotelle`,
		`(?:no|num|numa|na) (?:hospital|cadeira de rodas)`, `cadeira de rodas`,
	),
	// What is the addressee's: kin, pets, property.
	yours: words(
		`(?:your|ur)(?: \pL+)? (?:mum|mom|mother|dad|father|wife|husband|kids?|children|son|daughter|sister|brother|family|dog|cat|horse|pets?|car|house|home|flat|windows?|tyres?|tires?|shop|garage|garden)`,
		`(?:mum|mom|mother|dad|wife|husband|kids|children|son|daughter|sister|brother|family|dog|cat|horse|car|house|flat) of yours`,
		`(?:dein|deine|deinen|deinem|deiner) (?:mutter|vater|frau|mann|kinder|kind|sohn|tochter|schwester|bruder|familie|hund|katze|pferd|auto|haus|wohnung|fenster|reifen|laden)`,
		`(?:ton|ta|tes) (?:mere|pere|femme|mari|enfants|fils|fille|soeur|frere|famille|chien|chat|voiture|maison|fenetres|pneus)`,
		`(?:tu|tus) (?:madre|padre|mujer|esposa|marido|hijos?|hijas?|hermanas?|hermanos?|familia|perro|gato|coche|carro|casa|ventanas|ruedas)`,
		`(?:il tuo|la tua|i tuoi|le tue|tuo|tua) (?:madre|padre|moglie|marito|figli|figlio|figlia|sorella|fratello|famiglia|cane|gatto|macchina|auto|casa|finestre|gomme)`,
		`(?:seu|sua|seus|suas|teu|tua) (?:mae|pai|esposa|mulher|marido|filhos?|filhas?|irma|irmao|familia|cachorro|cao|gato|carro|casa|janelas|pneus)`,
	),
	// A harm that befalls such a thing: it goes missing, gets damaged, or "it would be sad if…".
	harmToYours: words(
		`go(?:es)? missing`, `went missing`, `disappear(?:s|ed)?`, `slashed`, `smashed`, `torched`, `easy to (?:smash|break|burn|slash|torch|find|get to)`,
		`(?:would|it'd|'d|will) be (?:a )?(?:sad|shame|pity|terrible|awful|tragic|tragedy|real shame|real pity) if`,
		`(?:ware|waere) (?:doch )?(?:traurig|schade|schlimm|eine schande),? wenn`,
		`(?:aufzustechen|aufstechen|zerstochen|verschwinden|verschwindet|verschwunden)`,
		`(?:ce serait|ca serait) (?:\pL+ )?(?:dommage|triste|bete) (?:que|si)`, `(?:seria|sería) (?:una )?(?:pena|lastima|triste) (?:que|si)`,
		`sarebbe (?:un )?(?:triste|peccato|vero peccato) se`, `seria (?:uma )?(?:pena|triste) se`,
	),
	// Weaker harms: being caught alone, waited for, not getting home whole.
	weakHarm: words(
		`(?:hurt|harm|stab|shoot|strangle|choke|bury|drown|end|kill|murder|gut|maim|beat up|tear|rip) (?:you|ya|u)(?: apart| to pieces| up)?`,
		`(?:catch|get|find) (?:you|ya|u) alone`, `(?:wait|waiting|be waiting) for (?:you|ya|u)`, `what happens to (?:your|ur) \pL+`,
		`(?:you'd|you would|you will|you'll) (?:last|make it home|make it out|get home)`, `make it home`, `settle this`,
		`(?:erwischt|erwischen|kriegt|kriegen) dich (?:\pL+ ){0,2}allein`, `warten (?:\pL+ ){0,5}auf dich`, `heil nach hause`,
		`rentrer (?:\pL+ ){0,2}entier`, `volver (?:\pL+ ){0,2}entero`, `tornare (?:\pL+ ){0,2}intero`, `voltar (?:\pL+ ){0,2}inteiro`,
	),
	// How it is put: a future, a condition, a time limit.
	frame: words(
		`will`, `going to`, `gonna`, `would`, `'d`, `if`, `when`, `once`, `until`, `before`, `by (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tonight|tomorrow|morning|the weekend)`, `tonight`, `tomorrow`, `one day`, `soon`, `after tonight`, `next time`, `easy to`,
		`wirst`, `wird`, `werden`, `wenn`, `bis`, `morgen`, `heute`, `irgendwann`, `bald`, `leicht`,
		`vas`, `va`, `vais`, `si`, `quand`, `ce soir`, `demain`, `vas a`, `va a`, `cuando`, `antes`, `manana`, `esta noche`,
		`se`, `quando`, `domani`, `stasera`, `vai`, `vou`, `amanha`, `hoje`,
	),
	// An oath or a prediction: the speaker vouches for it.
	oath: words(`mark my words`, `something tells me`, `i predict`, `count on it`, `i mean it`, `i promise`, `that's a promise`, `i'm telling you`, `trust me`, `not joking`, `no joke`,
		`versprochen`, `merk dir`, `glaub mir`, `je te le promets`, `crois-moi`, `te lo prometo`, `te lo juro`, `te lo giuro`, `ti prometto`, `anota ai`, `te prometo`, `pode apostar`),
	// A rhetorical question or insinuation put to the addressee.
	question: words(`do you (?:really |honestly )?think`, `what do you think`, `how long do you think`, `doesn't (?:it|she|he)`, `don't (?:they|you)`, `isn't (?:it|she|he)`, `you know`,
		`glaubst du`, `denkst du`, `tu crois`, `tu penses`, `crees que`, `pensi che`, `voce acha`),
	// Real-world anchors: home, work, school, hospital, family, being alone.
	anchor: words(`outside (?:this|the) game`, `(?:when|after) you log off`, `face to face`, `in person`, `real world`, `home`, `house`, `yours`, `where you live`, `alone`, `shift`, `work`, `office`, `school`, `hospital`, `police`, `irl`, `in real life`, `mum'?s`, `mom'?s`, `your (?:mum|mom|mother|dad|kids|wife|husband|family|car|dog|cat)`,
		`nach hause`, `nach der arbeit`, `arbeit`, `schule`, `krankenhaus`, `chez toi`, `maison`, `casa`, `lavoro`, `trabalho`, `hospital`, `ospedale`),
	// In-world dangers: when one of them is the agent, the line is a warning.
	hazard: words(`wolf`, `wolves`, `bears?`, `dragons?`, `trolls?`, `orcs?`, `goblins?`, `spiders?`, `undead`, `ghouls?`, `monsters?`, `beasts?`, `serpents?`, `wyverns?`, `marsh`, `swamp`, `bog`, `desert`, `the pass`, `cliffs?`, `ice`, `river`, `flood`, `storm`, `blizzard`, `avalanche`, `frost`, `cold`, `lava`, `quicksand`, `the mine`, `cave`, `dungeon`, `ruins`, `curse`, `poison`, `potion`,
		`wolfe`, `woelfe`, `baren`, `drache`, `drachen`, `sumpf`, `eis`, `fluss`, `sturm`, `loups?`, `dragon`, `lobos?`, `dragon`, `lupi`, `drago`),
	// The speaker or another person as the agent (a threat, even in a warning's words).
	agent: words(`i`, `i'll`, `i'm`, `i've`, `i'd`, `me`, `we`, `we'll`, `someone`, `somebody`, `my (?:brother|boys|friends|mates|guys|cousin|crew)`, `people who`,
		`ich`, `wir`, `jemand`, `meine jungs`, `je`, `yo`, `io`, `eu`),
	// Speech reported from a character of the story ("the healer says you will…").
	reported: newCue(`\b(?:the|a|an|that|this|old) [\pL-]+ (?:says|said|warns|warned|told (?:me|us|you)|predicts|predicted|claims|claimed|called|cried|shouted|whispers|whispered)\b`),
	// A fictional foe addressed by name: fictional combat ("surrender, bandit, or…").
	foe: newCue(`(?:^|[,:;!?"] ?)(?:you )?(?:foul |vile |cursed |wretched |accursed |filthy )?(?:wyrm|dragon|orc|bandit|necromancer|demon|fiend|beast|troll|goblin|knave|villain|witch|warlock|lich|cultist|brigand|scoundrel|cur|pirate|traitor)s?(?:[!.,?;"]|$)`),
	// Game banter and fictional combat.
	game: words(`arena`, `duel`, `duell`, `duelo`, `duello`, `rematch`, `revanche`, `respawn`, `pvp`, `deck`, `(?:next|that|this|the last) (?:round|match|game)`, `gg`, `good game`, `(?:nachsten|nachste) (?:runde|duell|match)`, `headshot`),
}
