package mqtt

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Placeholders of a topic template.
const (
	placeholderDevice = "device"
	placeholderRole   = "role"
	placeholderAction = "action"
)

// ErrInvalidTopicValue is matched by a [TopicValueError].
var ErrInvalidTopicValue = errors.New("mqtt: value cannot fill a topic placeholder")

// TopicValueError reports a command field that cannot fill a placeholder of
// the topic template, because it is empty or holds '/', '+', '#' or NUL.
// Dispatch rejects such a command.
type TopicValueError struct {
	// Placeholder is the placeholder's name, such as "device".
	Placeholder string
	// Value is the command's value for it.
	Value string
}

func (e *TopicValueError) Error() string {
	return fmt.Sprintf("mqtt: %s %q cannot fill {%s}: it must be non-empty UTF-8 without '/', '+', '#' or NUL",
		e.Placeholder, e.Value, e.Placeholder)
}

// Is reports whether target is ErrInvalidTopicValue.
func (e *TopicValueError) Is(target error) bool { return target == ErrInvalidTopicValue }

// topicValues holds the values of the placeholders for one command.
type topicValues struct {
	device, role, action string
}

func (v topicValues) get(name string) string {
	switch name {
	case placeholderDevice:
		return v.device
	case placeholderRole:
		return v.role
	default:
		return v.action
	}
}

// segment is a literal text (name empty) or a placeholder (name set).
type segment struct {
	literal string
	name    string
}

// template is a parsed topic template.
type template struct {
	raw      string
	segments []segment
}

// parseTemplate parses a topic template. Braces delimit a placeholder, which
// must be one of {device}, {role} and {action}; the literal text must not
// hold the wildcards '+' and '#' or NUL. With wholeLevels, every placeholder
// must fill a whole topic level, so that the template maps to a subscription
// filter with '+' in its place.
func parseTemplate(raw string, wholeLevels bool) (template, error) {
	t := template{raw: raw}
	if !utf8.ValidString(raw) {
		return t, errors.New("not valid UTF-8")
	}
	if len(raw) > 65535 {
		return t, errors.New("longer than 65535 bytes")
	}
	rest := raw
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		closeAt := strings.IndexByte(rest, '}')
		if closeAt >= 0 && (open < 0 || closeAt < open) {
			return t, errors.New("'}' without '{'")
		}
		if open < 0 {
			t.segments = append(t.segments, segment{literal: rest})
			break
		}
		if open > 0 {
			t.segments = append(t.segments, segment{literal: rest[:open]})
		}
		if closeAt < 0 {
			return t, errors.New("'{' without '}'")
		}
		name := rest[open+1 : closeAt]
		switch name {
		case placeholderDevice, placeholderRole, placeholderAction:
		default:
			return t, fmt.Errorf("unknown placeholder {%s}: want {device}, {role} or {action}", name)
		}
		t.segments = append(t.segments, segment{name: name})
		rest = rest[closeAt+1:]
	}
	for i, s := range t.segments {
		if s.name == "" {
			if strings.ContainsAny(s.literal, "+#\x00") {
				return t, errors.New("wildcards '+', '#' and NUL are not allowed in a topic")
			}
			continue
		}
		if !wholeLevels {
			continue
		}
		if i > 0 && !strings.HasSuffix(t.segments[i-1].literal, "/") {
			return t, fmt.Errorf("{%s} must fill a whole topic level", s.name)
		}
		if i+1 < len(t.segments) && !strings.HasPrefix(t.segments[i+1].literal, "/") {
			return t, fmt.Errorf("{%s} must fill a whole topic level", s.name)
		}
	}
	return t, nil
}

// validTopicValue reports whether v may fill a placeholder.
func validTopicValue(v string) bool {
	return v != "" && utf8.ValidString(v) && !strings.ContainsAny(v, "/+#\x00")
}

// render fills the template with v. It fails with a *TopicValueError when a
// used placeholder's value is not valid in a topic.
func (t template) render(v topicValues) (string, error) {
	var b strings.Builder
	b.Grow(len(t.raw) + 32)
	for _, s := range t.segments {
		if s.name == "" {
			b.WriteString(s.literal)
			continue
		}
		val := v.get(s.name)
		if !validTopicValue(val) {
			return "", &TopicValueError{Placeholder: s.name, Value: val}
		}
		b.WriteString(val)
	}
	return b.String(), nil
}

// filter returns the subscription filter that matches every topic the
// template renders: each placeholder becomes '+'.
func (t template) filter() string {
	var b strings.Builder
	for _, s := range t.segments {
		if s.name == "" {
			b.WriteString(s.literal)
		} else {
			b.WriteByte('+')
		}
	}
	return b.String()
}
