package classifytools

import "strings"

// Language guessing, recorded per verdict so that figures and refusals can be read per language.
// A guess from function words (articles, pronouns, auxiliaries), for the six languages the rules
// cover. Chosen over github.com/abadojack/whatlanggo (trigram profiles, 84 languages, served by
// the module proxy at v1.0.1 but unmaintained since 2019 and unreliable on one-line texts) and
// github.com/pemistahl/lingua-go (v1.4.0; accurate on short texts, but its language models cost
// tens of megabytes and more time per call than the whole rules pass, against BenchmarkModerate's
// budget): game lines are short, and the question is only which of six lexicons applies.

// Languages the rules cover; LanguageUnknown when no function word decides.
const LanguageUnknown = "und"

// functionWords are frequent words that mostly belong to one language (accents stripped, as
// the folded text is judged). A word shared by two languages counts for both.
var functionWords = map[string][]string{
	"en": {"the", "you", "your", "and", "is", "are", "i", "i'm", "will", "to", "of", "that", "it", "be", "my", "what", "this", "with", "have", "go", "don't", "just", "would", "if", "was", "at", "on", "all", "so", "can", "nobody", "know", "where", "for", "it's", "you're", "yourself"},
	"fr": {"le", "la", "les", "un", "une", "des", "tu", "t'es", "te", "ta", "ton", "tes", "je", "j'ai", "vais", "est", "et", "de", "du", "qui", "que", "pas", "ne", "ce", "sont", "vous", "avec", "dans", "sur", "pour", "personne", "toi", "moi", "va", "sais", "quand", "c'est", "ou", "au", "aux"},
	"es": {"el", "la", "los", "las", "un", "una", "eres", "tu", "te", "tus", "yo", "voy", "es", "y", "de", "del", "que", "no", "son", "con", "en", "por", "para", "nadie", "se", "donde", "cuando", "muy", "ya", "mi", "al", "lo", "le", "su", "sus", "hay", "como"},
	"de": {"der", "die", "das", "den", "dem", "ein", "eine", "einen", "du", "dich", "dir", "dein", "deine", "ich", "bin", "bist", "ist", "und", "nicht", "sind", "mit", "wenn", "wo", "zu", "zur", "auf", "aus", "niemand", "mich", "doch", "einfach", "werde", "wird", "sie", "es", "schon", "noch"},
	"pt": {"o", "a", "os", "as", "um", "uma", "voce", "vc", "seu", "sua", "seus", "te", "eu", "vou", "e", "de", "do", "da", "dos", "das", "que", "nao", "sao", "com", "em", "no", "na", "ninguem", "se", "onde", "quando", "ja", "meu", "minha", "vai", "ela", "ele", "isso"},
	"it": {"il", "lo", "la", "gli", "le", "un", "una", "sei", "tu", "ti", "tuo", "tua", "tuoi", "io", "sono", "e", "di", "del", "della", "che", "non", "con", "in", "per", "nessuno", "si", "dove", "quando", "gia", "mio", "mia", "vai", "ho", "ha", "questo", "quella", "chi"},
}

var wordLanguages = func() map[string][]string {
	m := map[string][]string{}
	for lang, words := range functionWords {
		for _, w := range words {
			m[w] = append(m[w], lang)
		}
	}
	return m
}()

// letterLanguages are letters (before accents are stripped) that mostly belong to some languages.
var letterLanguages = map[rune][]string{
	'ñ': {"es"}, '¿': {"es"}, '¡': {"es"}, 'ß': {"de"}, 'ä': {"de"}, 'ö': {"de"}, 'ü': {"de"},
	'ã': {"pt"}, 'õ': {"pt"}, 'ç': {"fr", "pt"}, 'œ': {"fr"}, 'ê': {"fr", "pt"}, 'â': {"fr", "pt"},
	'î': {"fr"}, 'û': {"fr"}, 'ë': {"fr"}, 'ï': {"fr"}, 'è': {"fr", "it"}, 'ì': {"it"}, 'ò': {"it"},
}

// guessLanguage names the language of a text by its function words (in words: the judged text
// through normalize, lower-cased and accent-stripped) and its letters (in folded: accents kept); a word or letter that belongs to
// one language only counts twice. Ties go in a fixed order (English first); nothing to go by
// is LanguageUnknown.
func guessLanguage(words, folded string) (string, languageScores) {
	var score languageScores
	count := func(langs []string) {
		w := 1
		if len(langs) == 1 {
			w = 2
		}
		for _, lang := range langs {
			score[index[lang]] += w
		}
	}
	for w := range strings.FieldsSeq(words) {
		count(wordLanguages[w])
	}
	for _, r := range folded {
		if r >= 0x80 {
			count(letterLanguages[r])
		}
	}
	best, bestScore := LanguageUnknown, 0
	for i, s := range score {
		if s > bestScore {
			best, bestScore = languageOrder[i], s
		}
	}
	return best, score
}

var (
	languageOrder = [6]string{"en", "fr", "es", "de", "pt", "it"}
	index         = map[string]int{"en": 0, "fr": 1, "es": 2, "de": 3, "pt": 4, "it": 5}
)

// languageScores are the function-word scores of a text, in languageOrder.
type languageScores [6]int

// possible reports whether the text may be in lang: a word or letter of lang, or none of any
// language (a text of slurs alone). Patterns of a language run only where it is possible, which
// keeps the other languages' rules off most English lines.
func (s languageScores) possible(lang string) bool {
	return s[index[lang]] > 0 || s == languageScores{}
}
