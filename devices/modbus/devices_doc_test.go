package modbus

import (
	"os"
	"regexp"
	"testing"
)

// TestDevicesDocListsEveryAction checks docs/DEVICES.md against the code:
// every action this package knows has a row in the modbus table, and the
// row's example payload passes the check a command gets at submission.
func TestDevicesDocListsEveryAction(t *testing.T) {
	doc, err := os.ReadFile("../../docs/DEVICES.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| [^|]+ \\| `([^`]+)` \\|")
	rows := map[Action]string{}
	for _, m := range row.FindAllSubmatch(doc, -1) {
		rows[Action(m[1])] = string(m[2])
	}
	for _, a := range knownActions() {
		payload, ok := rows[a]
		if !ok {
			t.Errorf("docs/DEVICES.md has no row for the modbus action %s", a)
			continue
		}
		if _, err := parsePayload(a, []byte(payload)); err != nil {
			t.Errorf("docs/DEVICES.md: the example payload of %s does not parse: %v", a, err)
		}
	}
	for a := range rows {
		if !knownAction(a) {
			t.Errorf("docs/DEVICES.md lists %s, which the code does not know", a)
		}
	}
}
