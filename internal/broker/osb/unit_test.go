package osb

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseAPIVersion(t *testing.T) {
	tests := map[string]struct {
		in   string
		want APIVersion
		err  bool
	}{
		"Current":  {in: "2.17", want: APIVersion{2, 17}},
		"Old":      {in: "2.13", want: APIVersion{2, 13}},
		"Next":     {in: "3.0", want: APIVersion{3, 0}},
		"Patch":    {in: "2.17.1", err: true},
		"Empty":    {in: "", err: true},
		"Letters":  {in: "two.seventeen", err: true},
		"Negative": {in: "-2.17", err: true},
		"Spaces":   {in: " 2.17", err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseAPIVersion(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("ParseAPIVersion(%q) error = %v, want error %v", tc.in, err, tc.err)
			}
			if err == nil && got != tc.want {
				t.Errorf("ParseAPIVersion(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
	if !(APIVersion{2, 10}).Less(DefaultMinAPIVersion) || (APIVersion{2, 11}).Less(DefaultMinAPIVersion) || (APIVersion{2, 17}).Less(DefaultMinAPIVersion) {
		t.Error("2.10 must be older, 2.11 and 2.17 not older than the default minimum")
	}
}

func TestParseOriginatingIdentity(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := map[string]struct {
		reason string
		in     string
		want   string
		err    bool
	}{
		"CloudFoundry": {reason: "The spec's example.", in: "cloudfoundry " + b64("{\n  \"user_id\": \"683ea748\"\n}"), want: `cloudfoundry {"user_id":"683ea748"}`},
		"Unpadded":     {reason: "Unpadded base64 is accepted too.", in: "kubernetes " + base64.RawStdEncoding.EncodeToString([]byte(`{"username":"a"}`)), want: `kubernetes {"username":"a"}`},
		"NoValue":      {reason: "Both parts are required.", in: "cloudfoundry", err: true},
		"NoPlatform":   {reason: "The platform must not be empty.", in: " " + b64(`{}`), err: true},
		"NotBase64":    {reason: "The value is base64.", in: "cloudfoundry !!!", err: true},
		"NotJSON":      {reason: "The value is JSON.", in: "cloudfoundry " + b64("user"), err: true},
		"NotObject":    {reason: "The value is a JSON object.", in: "cloudfoundry " + b64(`["a"]`), err: true},
		"TooLarge":     {reason: "Identities are bounded.", in: "cloudfoundry " + b64(`{"a":"`+strings.Repeat("x", maxIdentityBytes)+`"}`), err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseOriginatingIdentity(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nerror = %v, want error %v", tc.reason, err, tc.err)
			}
			if err == nil && got.Annotation() != tc.want {
				t.Errorf("%s\nannotation = %q, want %q", tc.reason, got.Annotation(), tc.want)
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	tests := map[string]struct {
		reason      string
		base, patch string
		want        string
	}{
		"AddKey":        {reason: "New keys are added, others stay.", base: `{"a":1}`, patch: `{"b":2}`, want: `{"a":1,"b":2}`},
		"ReplaceKey":    {reason: "Given keys are replaced.", base: `{"a":1,"b":2}`, patch: `{"a":3}`, want: `{"a":3,"b":2}`},
		"RemoveKey":     {reason: "null removes a key.", base: `{"a":1,"b":2}`, patch: `{"a":null}`, want: `{"b":2}`},
		"Nested":        {reason: "Objects merge recursively.", base: `{"o":{"x":1,"y":2}}`, patch: `{"o":{"y":3}}`, want: `{"o":{"x":1,"y":3}}`},
		"ArrayReplaced": {reason: "Arrays are replaced whole.", base: `{"l":[1,2]}`, patch: `{"l":[3]}`, want: `{"l":[3]}`},
		"NoBase":        {reason: "An instance without parameters gets the patch.", base: ``, patch: `{"a":1}`, want: `{"a":1}`},
		"BigInteger":    {reason: "Large integers are not rounded.", base: `{}`, patch: `{"n":12345678901234567890}`, want: `{"n":12345678901234567890}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := MergePatch([]byte(tc.base), []byte(tc.patch))
			if err != nil {
				t.Fatalf("%s\nmergePatch: %v", tc.reason, err)
			}
			if !SameObject(got, []byte(tc.want)) || string(got) != tc.want {
				t.Errorf("%s\nmergePatch(%s, %s) = %s, want %s", tc.reason, tc.base, tc.patch, got, tc.want)
			}
		})
	}
}

func TestObjectField(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1)
	tests := map[string]struct {
		reason string
		in     string
		want   string
		err    bool
	}{
		"Absent":       {reason: "Absent is nil.", in: ``},
		"Null":         {reason: "null is absent.", in: `null`},
		"Object":       {reason: "Objects are compacted.", in: `{ "a" : 1 }`, want: `{"a":1}`},
		"Array":        {reason: "Only objects.", in: `[1]`, err: true},
		"String":       {reason: "Only objects.", in: `"a"`, err: true},
		"TooDeep":      {reason: "Nesting is bounded.", in: deep, err: true},
		"BracesInText": {reason: "Brackets in strings do not count.", in: `{"a":"` + strings.Repeat("{", 100) + `"}`, want: `{"a":"` + strings.Repeat("{", 100) + `"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ObjectField([]byte(tc.in), "parameters")
			if (err != nil) != tc.err {
				t.Fatalf("%s\nerror = %v, want error %v", tc.reason, err, tc.err)
			}
			if string(got) != tc.want {
				t.Errorf("%s\ngot %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}
