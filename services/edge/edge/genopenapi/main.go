// Command genopenapi writes edge's openapi.json from openapi.base.json and the JSON Schemas of
// schemas/v1 (edge.GenerateOpenAPI). Run it with `go generate` in services/edge/edge.
package main

import (
	"fmt"
	"os"

	"github.com/worldgate/worldgate/services/edge/edge"
)

func main() {
	base, err := os.ReadFile("openapi.base.json")
	if err == nil {
		var doc []byte
		if doc, err = edge.GenerateOpenAPI(base); err == nil {
			err = os.WriteFile("openapi.json", doc, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genopenapi:", err)
		os.Exit(1)
	}
}
