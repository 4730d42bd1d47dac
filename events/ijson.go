package events

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// ProblemDuplicateKey: an object names the same member twice. Readers disagree on which value
// counts (Go's encoding/json and JavaScript keep the last, others the first), so a signature,
// a gate or a moderator reading one value would vouch for bytes another reader sees
// differently: every decoder on a trust boundary refuses such a message.
const ProblemDuplicateKey ProblemCode = "duplicate_key"

// CheckJSON reports whether data is exactly one JSON value that every reader reads the same
// way: valid syntax, valid UTF-8 and no object member named twice (I-JSON, RFC 7493). The
// error is a *Problem-carrying *InvalidError naming where the first fault is (a JSON Pointer),
// for what (e.g. "envelope"). The check is the maintained jsontext decoder's (the reference
// implementation of Go's encoding/json/v2), which refuses duplicate names and invalid UTF-8
// by default.
func CheckJSON(what string, data []byte) error {
	if p := jsonProblem(data); p != nil {
		return &InvalidError{What: what, Problems: []Problem{*p}}
	}
	return nil
}

// jsonProblem is CheckJSON's finding, nil when data is one I-JSON value.
func jsonProblem(data []byte) *Problem {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if err := dec.SkipValue(); err != nil {
		return syntaxProblem(err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return &Problem{ProblemMalformed, "", "data after the JSON value: send exactly one JSON value"}
	}
	return nil
}

func syntaxProblem(err error) *Problem {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return &Problem{ProblemMalformed, "", "not valid JSON: " + err.Error()}
	}
	path := string(se.JSONPointer)
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return &Problem{ProblemDuplicateKey, path,
			fmt.Sprintf("member %q is named more than once in its object: send each member once (readers disagree on which value counts)", se.JSONPointer.LastToken())}
	case strings.Contains(se.Err.Error(), "invalid UTF-8"): // jsontext does not export the error
		return &Problem{ProblemMalformed, path, "text is not valid UTF-8: encode strings as UTF-8"}
	}
	return &Problem{ProblemMalformed, path, "not valid JSON: " + se.Err.Error()}
}
