package cli

import (
	"fmt"
	"strings"
)

// Section is one program (or worldgate subcommand) of the configuration reference.
type Section struct {
	Title   string // heading: "gate", "worldgate provision"
	About   string // one paragraph: what it is, its environment prefix
	Command Command
}

// Reference renders docs/configuration.md: intro (Markdown), then per section a table of every
// flag with its environment variable, type, default and usage, as the program's -h prints them.
func Reference(intro string, sections []Section) string {
	var b strings.Builder
	b.WriteString(intro)
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Title)
		if s.About != "" {
			b.WriteString(s.About + "\n\n")
		}
		if len(s.Command.Flags) == 0 {
			b.WriteString("No flags.\n")
			continue
		}
		b.WriteString("| flag | environment | type | default | meaning |\n| --- | --- | --- | --- | --- |\n")
		for _, f := range s.Command.Flags {
			def := strings.TrimSuffix(strings.TrimPrefix(f.Default, `"`), `"`)
			if strings.HasPrefix(f.Default, `"`) {
				def = strings.ReplaceAll(def, `\"`, `"`)
			}
			fmt.Fprintf(&b, "| `-%s` | `%s` | %s | %s | %s |\n", f.Name, f.Env, f.Type, code(def), cell(f.Usage))
		}
	}
	return b.String()
}

// code formats a default for a table cell: in backticks (doubled when it holds one), nothing
// when empty.
func code(s string) string {
	if s == "" {
		return ""
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}
