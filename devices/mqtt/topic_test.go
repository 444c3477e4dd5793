package mqtt

import (
	"errors"
	"testing"
)

func TestTemplateRender(t *testing.T) {
	cases := []struct {
		tmpl string
		want string
	}{
		{"devices/{device}/cmd", "devices/valve-1/cmd"},
		{"plant/{role}/{device}/{action}", "plant/line-a/valve-1/open"},
		{"dev-{device}.{action}", "dev-valve-1.open"},
		{"static/topic", "static/topic"},
		{"{device}", "valve-1"},
	}
	v := topicValues{device: "valve-1", role: "line-a", action: "open"}
	for _, tc := range cases {
		tm, err := parseTemplate(tc.tmpl, false)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.tmpl, err)
		}
		got, err := tm.render(v)
		if err != nil || got != tc.want {
			t.Fatalf("render %q = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
}

func TestTemplateRejectsBadValues(t *testing.T) {
	tm, err := parseTemplate("devices/{device}/{action}", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a/b", "a+", "a#", "a\x00", "\xff"} {
		_, err := tm.render(topicValues{device: bad, action: "open"})
		var te *TopicValueError
		if !errors.As(err, &te) || te.Placeholder != "device" || te.Value != bad || !errors.Is(err, ErrInvalidTopicValue) {
			t.Fatalf("render with device %q = %v, want a TopicValueError for device", bad, err)
		}
	}
	// An unused placeholder may be empty.
	if _, err := tm.render(topicValues{device: "d", action: "a"}); err != nil {
		t.Fatalf("render without role: %v", err)
	}
}

func TestTemplateParseErrors(t *testing.T) {
	for _, bad := range []string{"a/{device", "a/device}", "a/{}/b", "a/{Device}", "a/#", "a/+/b", "a\x00", "\xff"} {
		if _, err := parseTemplate(bad, false); err == nil {
			t.Fatalf("parse %q succeeded", bad)
		}
	}
	for _, bad := range []string{"a/x{device}", "a/{device}x/b", "{device}{role}"} {
		if _, err := parseTemplate(bad, true); err == nil {
			t.Fatalf("parse %q for a reply topic succeeded", bad)
		}
	}
}

func TestTemplateFilter(t *testing.T) {
	cases := map[string]string{
		"devices/{device}/reply":         "devices/+/reply",
		"{role}/{device}/reply/{action}": "+/+/reply/+",
		"replies":                        "replies",
	}
	for tmpl, want := range cases {
		tm, err := parseTemplate(tmpl, true)
		if err != nil {
			t.Fatalf("parse %q: %v", tmpl, err)
		}
		if got := tm.filter(); got != want {
			t.Fatalf("filter of %q = %q, want %q", tmpl, got, want)
		}
	}
}
