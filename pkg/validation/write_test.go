package validation

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nastyMessage has what breaks naive XML: markup, an entity, both quotes,
// a NUL, an escape sequence, a vertical tab and a line break.
const nastyMessage = "init exited 1: <oops> & \"quoted\" 'single'\x00 \x1b[31mred\x1b[0m\vend\nsecond line"

var started = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

func passedReport() *Report {
	return &Report{
		Provider: "sample",
		Target:   "in-process",
		Passed:   true,
		Started:  started,
		Duration: 41234 * time.Millisecond,
		Steps: []Step{
			{ID: StepSetup, Phase: PhaseSetup, Title: "API servers started", Duration: 8 * time.Second, Result: ResultPassed},
			{ID: StepProviderInit, Phase: PhaseAssess, Title: "ServiceProvider sample initialized",
				WaitedFor: "ServiceProvider sample Initialized=True", Timeout: 3 * time.Minute, Duration: 2100 * time.Millisecond, Result: ResultPassed},
			{ID: StepCheck, Phase: PhaseAssess, Title: "DomainServiceAPI checked", Duration: 1500 * time.Millisecond, Result: ResultPassed,
				Message: "sampleobjects.domain.sample.services.openmcp.cloud is served in the MCP, and the check printed a very long line"},
			{ID: StepTeardown, Phase: PhaseTeardown, Title: "API servers stopped", Duration: 900 * time.Millisecond, Result: ResultPassed},
		},
	}
}

func failedReport(message string) *Report {
	return &Report{
		Provider: "sample",
		Target:   "in-process",
		Started:  started,
		Duration: 12345 * time.Millisecond,
		Steps: []Step{
			{ID: StepSetup, Phase: PhaseSetup, Title: "API servers started", Duration: 8 * time.Second, Result: ResultPassed},
			{ID: StepProviderInit, Phase: PhaseAssess, Title: "ServiceProvider sample initialized",
				WaitedFor: "ServiceProvider sample Initialized=True", Timeout: 3 * time.Minute, Duration: 3300 * time.Millisecond,
				Result: ResultFailed, Message: message,
				Failure: &Failure{
					Object: "ServiceProvider sample",
					Conditions: []metav1.Condition{
						{Type: "Initialized", Status: metav1.ConditionFalse, Reason: "InitFailed", Message: "init exited with code 1"},
						{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "ProviderInstallationPending"},
					},
					Events: []string{"Warning InitFailed: init exited with code 1"},
					Logs:   []LogTail{{Name: "/tmp/providers/serviceprovider-sample/init.log", Lines: []string{"starting", "init failing as asked with code 1"}}},
				}},
			{ID: StepProviderConfig, Phase: PhaseAssess, Title: "ProviderConfig applied", Duration: time.Microsecond, Result: ResultSkipped, Message: "skipped: provider-init failed"},
			{ID: StepProviderDelete, Phase: PhaseTeardown, Title: "ServiceProvider sample removed", Duration: 1200 * time.Millisecond, Result: ResultPassed},
		},
	}
}

func TestErr(t *testing.T) {
	if err := passedReport().Err(); err != nil {
		t.Errorf("Err of a passed report = %v; want nil", err)
	}
	err := failedReport("InitFailed: init exited with code 1").Err()
	var se *StepError
	if !errors.As(err, &se) || se.Step.ID != StepProviderInit {
		t.Fatalf("Err of a failed report = %#v; want a *StepError for %s", err, StepProviderInit)
	}
	for _, want := range []string{"sample", StepProviderInit, "ServiceProvider sample", "InitFailed: init exited with code 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %q; want it to name %q", err, want)
		}
	}
	if err := (&Report{Provider: "sample"}).Err(); err == nil {
		t.Error("Err of a report that did not pass and has no failed step = nil; want an error")
	}
}

func TestFailureText(t *testing.T) {
	if got := passedReport().FailureText(); got != "" {
		t.Errorf("FailureText of a passed report = %q; want empty", got)
	}
	got := failedReport("InitFailed: init exited with code 1").FailureText()
	for _, want := range []string{
		"Step provider-init failed after 3.3s: ServiceProvider sample initialized",
		"Waited for: ServiceProvider sample Initialized=True (timeout 3m0s)",
		"Object: ServiceProvider sample",
		"  Initialized=False InitFailed: init exited with code 1\n",
		"  Ready=Unknown ProviderInstallationPending\n",
		"  Warning InitFailed: init exited with code 1\n",
		"Log /tmp/providers/serviceprovider-sample/init.log (last 2 lines):\n  starting\n  init failing as asked with code 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("FailureText lacks %q:\n%s", want, got)
		}
	}
}

func TestWriteTable(t *testing.T) {
	cases := map[string]struct {
		report *Report
		want   []string
	}{
		"passed": {
			report: passedReport(),
			want: []string{
				"STEP           PHASE     RESULT  DURATION  NOTE\n",
				"setup          SETUP     passed  8.0s      \n",
				"provider-init  ASSESS    passed  2.1s      \n",
				"check          ASSESS    passed  1.5s      sampleobjects.domain.sample.services.openmcp.cloud is serve…\n",
				"teardown       TEARDOWN  passed  0.9s      \n",
				"passed in 41.2s\n",
			},
		},
		"failed": {
			report: failedReport("InitFailed:\tinit exited with code 1\nsecond line"),
			want: []string{
				"provider-init    ASSESS    failed   3.3s      InitFailed: init exited with code 1\n",
				"provider-config  ASSESS    skipped  -         skipped: provider-init failed\n",
				"FAILED at step provider-init after 12.3s\n",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.report.WriteTable(&buf); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("table lacks %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "second line") {
				t.Errorf("table shows more than a message's first line:\n%s", got)
			}
		})
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	r := failedReport(nastyMessage)
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\n  \"provider\": \"sample\",\n") {
		t.Errorf("JSON is not indented by two spaces:\n%s", buf.String())
	}
	var got Report
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("decode the report: %v\n%s", err, buf.String())
	}
	if got.Provider != "sample" || got.Target != "in-process" || got.Passed || !got.Started.Equal(started) || len(got.Steps) != 4 {
		t.Errorf("decoded report = %+v; want provider, target, passed, started and 4 steps as written", got)
	}
	if got.DurationSeconds != 12.345 {
		t.Errorf("durationSeconds = %v; want 12.345", got.DurationSeconds)
	}
	s := got.Steps[1]
	if s.ID != StepProviderInit || s.Phase != PhaseAssess || s.Result != ResultFailed || s.Message != nastyMessage ||
		s.WaitedFor != "ServiceProvider sample Initialized=True" {
		t.Errorf("decoded step = %+v; want the failed provider-init step as written", s)
	}
	if s.DurationSeconds != 3.3 || s.TimeoutSeconds != 180 {
		t.Errorf("step seconds = %v, timeout %v; want 3.3 and 180", s.DurationSeconds, s.TimeoutSeconds)
	}
	if s.Failure == nil || s.Failure.Object != "ServiceProvider sample" || len(s.Failure.Conditions) != 2 ||
		s.Failure.Conditions[0].Reason != "InitFailed" || len(s.Failure.Events) != 1 || len(s.Failure.Logs) != 1 ||
		len(s.Failure.Logs[0].Lines) != 2 {
		t.Errorf("decoded failure = %+v; want object, 2 conditions, 1 event, 1 log of 2 lines", s.Failure)
	}
	if got.Steps[2].DurationSeconds != 0 || strings.Contains(buf.String(), `"timeoutSeconds": 0`) {
		t.Errorf("a skipped step of a microsecond without timeout got seconds:\n%s", buf.String())
	}
	if r.DurationSeconds != 0 || r.Steps[1].DurationSeconds != 0 {
		t.Error("WriteJSON changed the report it wrote")
	}
	// A decoded report has only the seconds; writing it again keeps them.
	var again bytes.Buffer
	if err := got.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != buf.String() {
		t.Errorf("a decoded report written again differs:\n%s\nwant\n%s", again.String(), buf.String())
	}
}

func TestWriteJUnit(t *testing.T) {
	for name, tc := range map[string]struct {
		report                           *Report
		tests, failures, skipped         int
		failedCase, failureType, message string
	}{
		"passed": {report: passedReport(), tests: 4},
		"failed with a nasty message": {
			report: failedReport(nastyMessage), tests: 4, failures: 1, skipped: 1,
			failedCase:  "02 provider-init: ServiceProvider sample initialized",
			failureType: StepProviderInit,
			message:     "init exited 1: <oops> & \"quoted\" 'single' [31mred[0mend",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.report.WriteJUnit(&buf); err != nil {
				t.Fatal(err)
			}
			var got struct {
				XMLName xml.Name `xml:"testsuites"`
				Suites  []struct {
					Name      string `xml:"name,attr"`
					Tests     int    `xml:"tests,attr"`
					Failures  int    `xml:"failures,attr"`
					Skipped   int    `xml:"skipped,attr"`
					Time      string `xml:"time,attr"`
					Timestamp string `xml:"timestamp,attr"`
					Cases     []struct {
						Classname string `xml:"classname,attr"`
						Name      string `xml:"name,attr"`
						Time      string `xml:"time,attr"`
						Failure   *struct {
							Message string `xml:"message,attr"`
							Type    string `xml:"type,attr"`
							Text    string `xml:",chardata"`
						} `xml:"failure"`
						Skipped *struct {
							Message string `xml:"message,attr"`
						} `xml:"skipped"`
					} `xml:"testcase"`
				} `xml:"testsuite"`
			}
			// The strict decoder rejects characters XML 1.0 forbids.
			dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
			dec.Strict = true
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("JUnit XML is not well formed: %v\n%s", err, buf.String())
			}
			if len(got.Suites) != 1 {
				t.Fatalf("%d test suites; want 1", len(got.Suites))
			}
			s := got.Suites[0]
			if s.Name != "validate/sample" || s.Tests != tc.tests || s.Failures != tc.failures || s.Skipped != tc.skipped ||
				len(s.Cases) != tc.tests || s.Timestamp != "2025-03-04T10:00:00Z" {
				t.Errorf("suite %s: tests=%d failures=%d skipped=%d cases=%d timestamp=%s; want validate/sample %d %d %d %d 2025-03-04T10:00:00Z",
					s.Name, s.Tests, s.Failures, s.Skipped, len(s.Cases), s.Timestamp, tc.tests, tc.failures, tc.skipped, tc.tests)
			}
			var failures, skipped int
			for _, c := range s.Cases {
				if c.Classname != "validate.sample" {
					t.Errorf("test case %q has classname %q; want validate.sample", c.Name, c.Classname)
				}
				if c.Skipped != nil {
					skipped++
				}
				if c.Failure == nil {
					continue
				}
				failures++
				if c.Name != tc.failedCase || c.Failure.Type != tc.failureType || c.Failure.Message != tc.message || c.Time != "3.300" {
					t.Errorf("failed case %q (time %s): type %q, message %q; want %q (3.300): %q, %q",
						c.Name, c.Time, c.Failure.Type, c.Failure.Message, tc.failedCase, tc.failureType, tc.message)
				}
				for _, want := range []string{"<oops> & \"quoted\"", "second line", "Initialized=False InitFailed", "init failing as asked"} {
					if !strings.Contains(c.Failure.Text, want) {
						t.Errorf("failure text lacks %q:\n%s", want, c.Failure.Text)
					}
				}
			}
			if failures != tc.failures || skipped != tc.skipped {
				t.Errorf("%d failed and %d skipped test cases; want %d and %d", failures, skipped, tc.failures, tc.skipped)
			}
		})
	}
}

func TestXMLText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                "plain",
		"tab\tnl\ncr\r":        "tab\tnl\ncr\r",
		"nul\x00esc\x1b[0m":    "nulesc[0m",
		"bad utf8 \xff!":       "bad utf8 !",
		"real \uFFFD kept":     "real \uFFFD kept",
		"non-char \uFFFE gone": "non-char  gone",
	} {
		if got := xmlText(in); got != want {
			t.Errorf("xmlText(%q) = %q; want %q", in, got, want)
		}
	}
}
