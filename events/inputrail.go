package events

// InputRail records what the ai-worker's input rail did with the player's words before any
// model read them (provenance.inputRail, proposal schemaVersion 2): the moderation policy that
// judged them, the categories it flagged, those that blocked the model call (the proposal is
// then fallback content), and the personal data it redacted from what the model saw and from
// what Worldgate stores. Injection phrasings are flagged here and kept strictly as data.
type InputRail struct {
	PolicyVersion string      `json:"policyVersion"`
	Flagged       []string    `json:"flagged,omitempty"`
	Blocked       []string    `json:"blocked,omitempty"`
	Redactions    []Redaction `json:"redactions,omitempty"`
}

// Redaction is one kind of personal data removed from one field of the player's input.
type Redaction struct {
	Field string `json:"field"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}
