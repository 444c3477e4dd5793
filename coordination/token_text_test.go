package coordination

import (
	"encoding/json"
	"testing"
)

func TestFencingTokenText(t *testing.T) {
	minted, err := NewFencingToken(4242, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []FencingToken{minted, NoEpoch} {
		data, err := json.Marshal(struct{ Token FencingToken }{token})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ Token FencingToken }
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", data, err)
		}
		if back.Token != token {
			t.Fatalf("round trip of %s gave %s", token, back.Token)
		}
	}
	if got, _ := json.Marshal(minted); string(got) != `"4242:7"` {
		t.Fatalf("json of %s = %s, want \"4242:7\"", minted, got)
	}
	var bad FencingToken
	for _, text := range []string{`"4242"`, `"-1:0"`, `"01:2"`, `" 1:2"`} {
		if err := json.Unmarshal([]byte(text), &bad); err == nil {
			t.Errorf("unmarshal %s: want an error, got %s", text, bad)
		}
	}
}
