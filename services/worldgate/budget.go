package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func init() {
	commands["budget"] = command{"budget [show|set|raise|pause|resume|reset|actor]: LLM spend against every budget; change budgets at runtime", runBudget}
}

const budgetUsage = `Usage:
  worldgate budget [show] [-actor ID] [-subjects N] [-json]   spend against every budget (per actor: -actor, or the fullest subjects)
  worldgate budget set    NAME|-global|-purpose P -usd X [-tokens N]   replace a budget's limit
  worldgate budget raise  NAME|-global|-purpose P -usd X [-tokens N]   add to the limit in force (negative lowers it)
  worldgate budget pause  NAME|-global|-purpose P|-all                 kill switch: no call under it is paid for
  worldgate budget resume NAME|-global|-purpose P|-all
  worldgate budget reset  NAME|-global|-purpose P|-all                 back to the file's limit, unpaused
  worldgate budget actor  ID [-multiplier M] [-cool-down D] [-reason TEXT] | -clear
                                                                       tighten (or clear) one actor's per-actor budgets

Budgets come from the ai-worker's budget file (-budgets; worldgate dev embeds one). A change is
kept in the worldgate-budget KV bucket and every ai-worker replica applies it within a second.`

// runBudget is `worldgate budget`: it reads and changes the LLM budgets of a running system
// through the control bucket (services/ai-worker/budget), as the operator user.
func runBudget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb := "show"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("budget "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, budgetUsage); fs.PrintDefaults() }
	var n natsFlags
	n.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	actor := fs.String("actor", "", "show: that actor's windows of the per-actor budgets and its policy")
	subjects := fs.Int("subjects", 5, "show: list this many of the fullest subjects of each per-subject budget (0: none)")
	global := fs.Bool("global", false, "set/raise/pause/resume/reset: every global budget")
	purpose := fs.String("purpose", "", "set/raise/pause/resume/reset: every budget of this purpose")
	all := fs.Bool("all", false, "pause/resume/reset: every budget")
	usd := fs.String("usd", "", "set/raise: USD per window")
	tokens := fs.String("tokens", "", "set/raise: tokens per window")
	by := fs.String("by", currentUser(), "who makes the change (kept with it, logged by every replica)")
	multiplier := fs.Float64("multiplier", 0, "actor: scale the actor's per-actor budgets (0.5 halves them)")
	coolDown := fs.Duration("cool-down", 0, "actor: pay for none of the actor's calls for this long")
	reason := fs.String("reason", "", "actor: why (shown with the policy)")
	clearPolicy := fs.Bool("clear", false, "actor: remove the actor's policy")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	var names []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		names, args = append(names, args[0]), args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	names = append(names, fs.Args()...)

	var change budget.Change
	switch verb {
	case "show", "actor":
	case "set", "raise":
		u, t, err := budgetAmounts(*usd, *tokens)
		if err != nil {
			return err
		}
		if u == nil && t == nil {
			return fmt.Errorf("budget %s needs -usd, -tokens or both", verb)
		}
		if verb == "set" {
			if err := positiveAmounts(u, t); err != nil {
				return err
			}
			change.SetUSD, change.SetTokens = u, t
		} else {
			change.RaiseUSD, change.RaiseTokens = u, t
		}
	case "pause":
		change.Pause = true
	case "resume":
		change.Resume = true
	case "reset":
		change.Reset = true
	default:
		fs.Usage()
		return fmt.Errorf("unknown budget command %q", verb)
	}
	change.By = *by
	if verb == "actor" && len(names) != 1 {
		return errors.New("budget actor needs one actor id, e.g. player:ada")
	}
	if verb == "show" && len(names) > 0 {
		return fmt.Errorf("budget show takes no names (got %s); use -actor for one actor", strings.Join(names, " "))
	}
	if verb == "set" || verb == "raise" {
		if *all {
			return fmt.Errorf("budget %s changes limits one budget at a time (or -global, -purpose): -all is for pause, resume and reset", verb)
		}
	}

	nc, js, err := natsx.Connect(n.as("worldgate-budget"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	b, err := budget.OpenBuckets(ctx, js)
	if err != nil {
		return err
	}
	now := time.Now()

	switch verb {
	case "show":
		return showBudgets(ctx, b, now, *actor, *subjects, *asJSON, stdout)
	case "actor":
		if *clearPolicy {
			if err := actorpolicy.Clear(ctx, b.Control, names[0]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "actor %s: policy cleared; its per-actor budgets are the file's again\n", names[0])
			return nil
		}
		if *multiplier < 0 || *multiplier > 1 {
			return fmt.Errorf("-multiplier %v: a policy tightens, so it is a share between 0 and 1 (use budget raise for more)", *multiplier)
		}
		if *multiplier == 0 && *coolDown <= 0 {
			return errors.New("budget actor needs -multiplier, -cool-down or -clear")
		}
		p := actorpolicy.Policy{Actor: names[0], Multiplier: *multiplier, Reason: cmpOr(*reason, "set by "+*by), At: now.UTC()}
		if *coolDown > 0 {
			p.CoolDownUntil = now.Add(*coolDown).UTC()
		}
		if err := actorpolicy.Set(ctx, b.Control, p); err != nil {
			return err
		}
		return printJSONOr(stdout, *asJSON, p, func() {
			fmt.Fprintf(stdout, "actor %s: %s\n", p.Actor, policyText(p, now))
		})
	}

	// set, raise, pause, resume, reset: resolve the budgets named or selected.
	reports, err := budget.Reports(ctx, b, now, "")
	if err != nil {
		return err
	}
	targets, err := selectBudgets(reports, names, *global, *purpose, *all)
	if err != nil {
		return err
	}
	type result struct {
		Budget   string           `json:"budget"`
		Override *budget.Override `json:"override,omitempty"`
	}
	var results []result
	for _, name := range targets {
		o, err := budget.Apply(ctx, b.Control, name, change)
		if err != nil {
			return fmt.Errorf("budget %s: %w", name, err)
		}
		results = append(results, result{Budget: name, Override: o})
	}
	return printJSONOr(stdout, *asJSON, results, func() {
		for _, r := range results {
			fmt.Fprintf(stdout, "%s: %s\n", r.Budget, overrideText(r.Override))
		}
		fmt.Fprintln(stdout, "every ai-worker replica applies this within a second (worldgate budget shows the budgets in force)")
	})
}

// selectBudgets resolves names and selectors to the budgets they mean; nothing selected, or a
// name that no budget has, is an error (a typo must not look like a change).
func selectBudgets(reports []budget.Report, names []string, global bool, purpose string, all bool) ([]string, error) {
	known := map[string]budget.Budget{}
	for _, r := range reports {
		known[r.Budget.Name] = r.Budget
	}
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range names {
		if _, ok := known[n]; !ok {
			return nil, fmt.Errorf("no budget is called %q (worldgate budget lists them)", n)
		}
		add(n)
	}
	for _, r := range reports {
		switch {
		case all,
			global && r.Budget.Scope == budget.ScopeGlobal,
			purpose != "" && r.Budget.Scope == budget.ScopePurpose && r.Budget.Match == purpose:
			add(r.Budget.Name)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	switch {
	case global:
		return nil, errors.New("no global budget is configured")
	case purpose != "":
		return nil, fmt.Errorf("no budget of purpose %q is configured", purpose)
	case all:
		return nil, errors.New("no budget is configured")
	}
	return nil, errors.New("name a budget, or select with -global, -purpose P or -all")
}

func budgetAmounts(usd, tokens string) (*float64, *int64, error) {
	var u *float64
	var t *int64
	if usd != "" {
		v, err := strconv.ParseFloat(strings.TrimPrefix(usd, "$"), 64)
		if err != nil {
			return nil, nil, fmt.Errorf("-usd %q is not a number", usd)
		}
		u = &v
	}
	if tokens != "" {
		v, err := strconv.ParseInt(tokens, 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("-tokens %q is not a whole number", tokens)
		}
		t = &v
	}
	return u, t, nil
}

// positiveAmounts refuses a limit of zero or less before anything is changed: a limit is an
// amount per window, and stopping every call is what pause is for. (A raise is checked
// against the limit in force by budget.Apply.)
func positiveAmounts(usd *float64, tokens *int64) error {
	const stop = "; to stop paying for calls under a budget, use `worldgate budget pause NAME` (reset restores the file's limit)"
	if usd != nil && !(*usd > 0) {
		return fmt.Errorf("-usd %s: a USD limit must be more than $0%s", strconv.FormatFloat(*usd, 'f', -1, 64), stop)
	}
	if tokens != nil && *tokens <= 0 {
		return fmt.Errorf("-tokens %d: a token limit must be more than 0%s", *tokens, stop)
	}
	return nil
}

// budgetView is what worldgate budget show prints (and -json encodes).
type budgetView struct {
	Budgets []budgetRow          `json:"budgets"`
	Actor   string               `json:"actor,omitempty"`
	Policy  *actorpolicy.Policy  `json:"policy,omitempty"`
	Actors  []actorpolicy.Policy `json:"actorPolicies,omitempty"`
}

type budgetRow struct {
	budget.Report
	Top []budget.SubjectUsage `json:"fullest,omitempty"`
}

func showBudgets(ctx context.Context, b budget.Buckets, now time.Time, actor string, top int, asJSON bool, stdout io.Writer) error {
	reports, err := budget.Reports(ctx, b, now, "")
	if err != nil {
		return err
	}
	if actor != "" {
		// The actor's own windows of the per-actor budgets (location and region budgets stay
		// in aggregate).
		mine, err := budget.Reports(ctx, b, now, actor)
		if err != nil {
			return err
		}
		for i := range reports {
			if reports[i].Budget.Scope == budget.ScopeActor && i < len(mine) && mine[i].Budget.Name == reports[i].Budget.Name {
				reports[i] = mine[i]
			}
		}
	}
	v := budgetView{Actor: actor}
	for _, r := range reports {
		row := budgetRow{Report: r}
		if actor == "" && top > 0 && r.Budget.Scope.PerSubject() {
			if row.Top, err = budget.Subjects(ctx, b, r, now, top); err != nil {
				return err
			}
		}
		v.Budgets = append(v.Budgets, row)
	}
	if actor != "" {
		if v.Policy, err = actorpolicy.Get(ctx, b.Control, actor); err != nil {
			return err
		}
	} else if v.Actors, err = actorpolicy.List(ctx, b.JS, b.Control); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	if len(reports) == 0 {
		fmt.Fprintln(stdout, "no budgets: no ai-worker has published a budget file (ai-worker -budgets FILE; docs/budgets.md)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tCOVERS\tWINDOW\tUSED USD\tLIMIT USD\tUSED TOKENS\tLIMIT TOKENS\tUSED\tSTATE")
	for _, row := range v.Budgets {
		r := row.Report
		state := "ok"
		switch {
		case r.Paused():
			state = "PAUSED by " + cmpOr(r.Override.By, "an operator")
		case r.Budget.Scope.PerSubject() && (actor == "" || r.Budget.Scope != budget.ScopeActor):
			state = fmt.Sprintf("%d with a window, %d above 80%%", r.Subjects, r.Above80)
		case r.Ratio >= 1:
			state = "SPENT"
		case r.Budget.DegradeAt > 0 && r.Budget.DegradeAt < 1 && r.Ratio > r.Budget.DegradeAt:
			state = fmt.Sprintf("low (above %.0f%%: cheaper tier)", r.Budget.DegradeAt*100)
		}
		if r.Override != nil && !r.Paused() && (r.Override.USD != nil || r.Override.Tokens != nil) {
			state += " (limit set by " + cmpOr(r.Override.By, "an operator") + ")"
		}
		covers := r.Budget.Describe()
		if r.Subject != "" && actor != "" {
			covers += ": " + r.Subject
		} else if r.Subject != "" {
			covers += " (fullest: " + r.Subject + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s (ends %s)\t%s\t%s\t%d\t%s\t%.0f%%\t%s\n", r.Budget.Name, covers, r.Budget.Window, r.Ends.UTC().Format("15:04 Jan 2"),
			usdText(r.Used.Micros), limitUSD(r.Limit.Micros), r.Used.Tokens, limitTokens(r.Limit.Tokens), r.Ratio*100, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range v.Budgets {
		if len(row.Top) == 0 {
			continue
		}
		fmt.Fprintf(stdout, "\n%s, fullest %ss this %s:\n", row.Budget.Name, row.Budget.Scope, row.Budget.Window)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SUBJECT\tUSED USD\tLIMIT USD\tUSED TOKENS\tLIMIT TOKENS\tUSED\tPOLICY")
		for _, s := range row.Top {
			pol := "-"
			if s.Policy != nil {
				pol = policyText(*s.Policy, now)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%.0f%%\t%s\n", s.Subject, usdText(s.Used.Micros), limitUSD(s.Limit.Micros), s.Used.Tokens, limitTokens(s.Limit.Tokens), s.Ratio*100, pol)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if actor != "" {
		if v.Policy != nil {
			fmt.Fprintf(stdout, "\nactor %s: %s\n", actor, policyText(*v.Policy, now))
		} else {
			fmt.Fprintf(stdout, "\nactor %s: no policy (the file's per-actor limits)\n", actor)
		}
	}
	if len(v.Actors) > 0 {
		fmt.Fprintln(stdout, "\nactor policies (repeat offenders and operators' changes):")
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ACTOR\tPOLICY")
		for _, p := range v.Actors {
			fmt.Fprintf(tw, "  %s\t%s\n", p.Actor, policyText(p, now))
		}
		return tw.Flush()
	}
	return nil
}

func policyText(p actorpolicy.Policy, now time.Time) string {
	var parts []string
	if m := p.MultiplierAt(now); m > 0 && m != 1 {
		if p.DecayUntil.IsZero() {
			parts = append(parts, fmt.Sprintf("limits ×%g", m))
		} else {
			parts = append(parts, fmt.Sprintf("limits ×%.2f now (×%g at strike %d, back to ×1 at %s)", m, p.Multiplier, p.Strikes, p.DecayUntil.UTC().Format(time.RFC3339)))
		}
	}
	if now.Before(p.CoolDownUntil) {
		parts = append(parts, "no paid calls until "+p.CoolDownUntil.UTC().Format(time.RFC3339))
	}
	if len(parts) == 0 {
		parts = append(parts, "no longer in effect")
	}
	s := strings.Join(parts, ", ")
	if p.Reason != "" {
		s += " — " + p.Reason
	}
	return s + " (set " + p.At.UTC().Format(time.RFC3339) + ")"
}

func overrideText(o *budget.Override) string {
	if o == nil {
		return "back to the file's limit, not paused"
	}
	var parts []string
	if o.Paused {
		parts = append(parts, "PAUSED (no call under it is paid for; the game gets static content)")
	}
	if o.USD != nil {
		parts = append(parts, "limit $"+strconv.FormatFloat(*o.USD, 'f', -1, 64))
	}
	if o.Tokens != nil {
		parts = append(parts, fmt.Sprintf("limit %d tokens", *o.Tokens))
	}
	if len(parts) == 0 {
		parts = append(parts, "resumed, the file's limit")
	}
	return strings.Join(parts, ", ")
}

func usdText(micros int64) string { return "$" + strconv.FormatFloat(budget.USD(micros), 'f', 6, 64) }

func limitUSD(micros int64) string {
	if micros <= 0 {
		return "-"
	}
	return "$" + strconv.FormatFloat(budget.USD(micros), 'f', -1, 64)
}

func limitTokens(t int64) string {
	if t <= 0 {
		return "-"
	}
	return strconv.FormatInt(t, 10)
}

func printJSONOr(stdout io.Writer, asJSON bool, v any, text func()) error {
	if asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	text()
	return nil
}
