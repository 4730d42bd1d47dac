package classifytools

import _ "embed"

// labelledModeration is the labelled moderation set (testdata/moderation/README.md): the one
// copy, read by TestModerationSet and, through LabelledModerationSet, by the gates' evaluation
// set (services/worldgate/evalset), whose safety cases it is.
//
//go:embed testdata/moderation/labelled.tsv
var labelledModeration []byte

// LabelledModerationSet returns the labelled moderation set: one line per sentence,
// "labels<TAB>text", the first label the category the line must be flagged for ("benign": must
// not be flagged), further labels categories also acceptable for it. A line's half is the
// FNV-1a 64-bit hash of its text: odd is held out from tuning.
func LabelledModerationSet() []byte { return append([]byte(nil), labelledModeration...) }
