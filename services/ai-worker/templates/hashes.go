package templates

import (
	"encoding/json"
	"os"
)

// Hashes are every template version's SHA-256, keyed "id@version": the templates file the
// gate's -templates reads (the replay gate checks recorded template hashes against it).
func Hashes() map[string]string {
	m := map[string]string{}
	reg := Registry()
	for _, ref := range reg.List() {
		if t, ok := reg.GetVersion(ref.ID, ref.Version); ok {
			m[ref.ID+"@"+ref.Version] = t.SHA256
		}
	}
	return m
}

// WriteHashes writes Hashes to path as JSON, the gate's -templates file.
func WriteHashes(path string) error {
	b, err := json.Marshal(Hashes())
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
