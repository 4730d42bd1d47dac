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

// The outside-style moderation set (testdata/moderation/outside/GUIDE.md): lines written from a
// labelling guide, in six languages and disguised forms, before any rule was tuned to them.
// heldout.tsv is frozen (TestOutsideSetFrozen); rules are tuned on tune.tsv only.
var (
	//go:embed testdata/moderation/outside/tune.tsv
	outsideTune []byte
	//go:embed testdata/moderation/outside/heldout.tsv
	outsideHeldOut []byte
)

// OutsideModerationSet returns the outside-style set's two halves, one line per sentence:
// "labels<TAB>lang<TAB>form<TAB>text" (labels as in LabelledModerationSet, lang an ISO 639-1
// code, form how it is written: plain, indirect, leet, spaced, fullwidth, homoglyph, zerowidth,
// bidi). The held-out half is never looked at for tuning.
func OutsideModerationSet() (tune, heldOut []byte) {
	return append([]byte(nil), outsideTune...), append([]byte(nil), outsideHeldOut...)
}
