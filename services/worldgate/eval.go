package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/worldgate/worldgate/services/gate/evalset"
)

func init() {
	commands["eval"] = command{"grade the invariant, dedup and safety gates on the labelled evaluation set (precision and recall per gate and category, both halves)", runEval}
}

// runEval runs the gates' own rules on the labelled set (services/gate/evalset) with real parts
// started in this process, prints the scores of both halves, and exits 1 when a gate is below
// its bar. -misses prints the tuning half's wrong verdicts, never the held-out half's.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the scores (and with -misses the misses) as JSON")
	misses := fs.Bool("misses", false, "also list the tuning half's wrong verdicts (for tuning a rule; the held-out half is never listed)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("usage: worldgate eval [-json] [-misses]")
	}
	set, err := evalset.Load()
	if err != nil {
		return err
	}
	vs, err := evalset.Run(ctx, set, evalset.Options{})
	if err != nil {
		return err
	}
	scores := evalset.Score(vs)
	var wrong []evalMiss
	if *misses {
		for _, v := range vs {
			if !v.Case.HeldOut && !v.Right() {
				wrong = append(wrong, evalMiss{Verdict: v, Category: v.Case.Category, Expect: v.Case.Expect, Note: v.Case.Note})
			}
		}
	}
	below := evalset.BelowBar(scores)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Halves   []evalset.HalfScore `json:"halves"`
			BelowBar []string            `json:"belowBar"`
			Misses   []evalMiss          `json:"misses,omitempty"`
		}{scores, below, wrong}); err != nil {
			return err
		}
	} else {
		if err := evalset.Print(stdout, scores); err != nil {
			return err
		}
		if *misses {
			fmt.Fprintf(stdout, "tuning half: %d wrong verdicts\n", len(wrong))
			for _, m := range wrong {
				fmt.Fprintf(stdout, "%s %s/%s: want %s, got %s %v %s\n", m.ID, m.Gate, m.Category, m.Expect, m.Outcome, m.For, m.Reason)
			}
		}
	}
	if len(below) > 0 {
		if !*asJSON {
			fmt.Fprintln(stderr, "below the bar:\n  "+strings.Join(below, "\n  "))
		}
		return exitError{1}
	}
	return nil
}

// evalMiss is a wrong verdict of the tuning half.
type evalMiss struct {
	evalset.Verdict
	Category string `json:"category"`
	Expect   string `json:"expect"`
	Note     string `json:"note,omitempty"`
}
