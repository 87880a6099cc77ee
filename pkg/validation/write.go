package validation

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// noteWidth is how many characters of a step's message the table's NOTE
// column shows.
const noteWidth = 60

// StepError is the error of a report whose step failed (see Report.Err).
type StepError struct {
	// Provider is the report's provider.
	Provider string
	// Step is the first failed step.
	Step Step
}

// Error names the step, the object it waited on and its message.
func (e *StepError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "validation of %s failed at step %s", orUnnamed(e.Provider), e.Step.ID)
	if e.Step.Title != "" {
		fmt.Fprintf(&b, " (%s)", e.Step.Title)
	}
	if f := e.Step.Failure; f != nil && f.Object != "" {
		fmt.Fprintf(&b, " on %s", f.Object)
	}
	if e.Step.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Step.Message)
	}
	return b.String()
}

// FailedStep returns the first failed step, or nil when none failed.
func (r *Report) FailedStep() *Step {
	for i := range r.Steps {
		if r.Steps[i].Result == ResultFailed {
			return &r.Steps[i]
		}
	}
	return nil
}

// Err returns nil when the run passed, else an error naming the first
// failed step, its object and message: a *StepError, or a plain error when
// the report did not pass without a failed step (a run that never got to
// its steps).
func (r *Report) Err() error {
	if s := r.FailedStep(); s != nil {
		return &StepError{Provider: r.Provider, Step: *s}
	}
	if !r.Passed {
		return fmt.Errorf("validation of %s did not pass (no step failed; %d steps recorded)", orUnnamed(r.Provider), len(r.Steps))
	}
	return nil
}

// FailureText describes the first failed step for a terminal or a test
// log: the step, what it waited for, its message, and the evidence (the
// object, its conditions and events, the tails of the provider's logs). It
// is empty when no step failed.
func (r *Report) FailureText() string {
	s := r.FailedStep()
	if s == nil {
		return ""
	}
	return failureText(*s)
}

// failureText describes one failed step; see Report.FailureText.
func failureText(s Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Step %s failed after %s", s.ID, formatDuration(s.Duration))
	if s.Title != "" {
		fmt.Fprintf(&b, ": %s", s.Title)
	}
	b.WriteString("\n")
	if s.WaitedFor != "" {
		fmt.Fprintf(&b, "Waited for: %s", s.WaitedFor)
		if s.Timeout > 0 {
			fmt.Fprintf(&b, " (timeout %s)", formatDuration(s.Timeout))
		}
		b.WriteString("\n")
	}
	if s.Message != "" {
		writeBlock(&b, "Message:", []string{s.Message})
	}
	f := s.Failure
	if f == nil {
		return b.String()
	}
	if f.Object != "" {
		fmt.Fprintf(&b, "Object: %s\n", f.Object)
	}
	if len(f.Conditions) > 0 {
		lines := make([]string, 0, len(f.Conditions))
		for _, c := range f.Conditions {
			line := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
			if c.Message != "" {
				line += ": " + c.Message
			}
			lines = append(lines, line)
		}
		writeBlock(&b, "Conditions:", lines)
	}
	if len(f.Events) > 0 {
		writeBlock(&b, "Events:", f.Events)
	}
	for _, l := range f.Logs {
		if len(l.Lines) == 0 {
			fmt.Fprintf(&b, "Log %s: empty\n", l.Name)
			continue
		}
		writeBlock(&b, fmt.Sprintf("Log %s (last %d lines):", l.Name, len(l.Lines)), l.Lines)
	}
	return b.String()
}

// writeBlock writes a heading and lines indented under it; a line with
// line breaks becomes several.
func writeBlock(b *strings.Builder, heading string, lines []string) {
	b.WriteString(heading)
	b.WriteString("\n")
	for _, l := range lines {
		for _, part := range strings.Split(strings.TrimRight(l, "\n"), "\n") {
			b.WriteString("  ")
			b.WriteString(part)
			b.WriteString("\n")
		}
	}
}

// WriteTable writes a summary: one row per step with its phase, result,
// duration and a shortened message, then a line with the outcome ("passed
// in 41.2s", "FAILED at step provider-init after 12.3s").
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tPHASE\tRESULT\tDURATION\tNOTE")
	for _, s := range r.Steps {
		duration := formatDuration(s.Duration)
		if s.Result == ResultSkipped {
			duration = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(s.ID, 0), s.Phase, s.Result, duration, oneLine(s.Message, noteWidth))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report's table: %w", err)
	}
	if _, err := fmt.Fprintln(w, r.outcome()); err != nil {
		return fmt.Errorf("write the report's outcome: %w", err)
	}
	return nil
}

// outcome is the report's total line.
func (r *Report) outcome() string {
	d := formatDuration(r.Duration)
	switch s := r.FailedStep(); {
	case s != nil:
		return fmt.Sprintf("FAILED at step %s after %s", s.ID, d)
	case !r.Passed:
		return fmt.Sprintf("FAILED after %s", d)
	default:
		return fmt.Sprintf("passed in %s", d)
	}
}

// WriteJSON writes the report as indented JSON, with the seconds fields
// filled from the durations. The report itself is not changed.
func (r *Report) WriteJSON(w io.Writer) error {
	out := *r
	out.Steps = append([]Step(nil), r.Steps...)
	if r.Duration != 0 {
		out.DurationSeconds = seconds(r.Duration)
	}
	for i := range out.Steps {
		s := &out.Steps[i]
		if s.Duration != 0 {
			s.DurationSeconds = seconds(s.Duration)
		}
		if s.Timeout != 0 {
			s.TimeoutSeconds = seconds(s.Timeout)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&out); err != nil {
		return fmt.Errorf("write the report as JSON: %w", err)
	}
	return nil
}

// The JUnit XML elements WriteJUnit writes: the schema Jenkins, GitLab and
// GitHub test reporters read.
type (
	junitSuites struct {
		XMLName xml.Name     `xml:"testsuites"`
		Suites  []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name      string      `xml:"name,attr"`
		Tests     int         `xml:"tests,attr"`
		Failures  int         `xml:"failures,attr"`
		Errors    int         `xml:"errors,attr"`
		Skipped   int         `xml:"skipped,attr"`
		Time      string      `xml:"time,attr"`
		Timestamp string      `xml:"timestamp,attr,omitempty"`
		Cases     []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Classname string        `xml:"classname,attr"`
		Name      string        `xml:"name,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitFailure `xml:"failure,omitempty"`
		Skipped   *junitSkipped `xml:"skipped,omitempty"`
		SystemOut string        `xml:"system-out,omitempty"`
	}
	junitFailure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	junitSkipped struct {
		Message string `xml:"message,attr,omitempty"`
	}
)

// WriteJUnit writes the report as JUnit XML: one test suite
// "validate/<provider>" with one test case per step, named "NN id: title".
// A failed step carries its failure text, a skipped one its reason, a
// passed one with a message (what a check printed) that message as
// system-out. Characters XML 1.0 does not allow are left out.
func (r *Report) WriteJUnit(w io.Writer) error {
	provider := orUnnamed(r.Provider)
	suite := junitSuite{
		Name:  xmlText("validate/" + provider),
		Tests: len(r.Steps),
		Time:  junitSeconds(r.Duration, r.DurationSeconds),
	}
	if !r.Started.IsZero() {
		suite.Timestamp = r.Started.UTC().Format(time.RFC3339)
	}
	for i, s := range r.Steps {
		name := fmt.Sprintf("%02d %s", i+1, s.ID)
		if s.Title != "" {
			name += ": " + s.Title
		}
		c := junitCase{
			Classname: xmlText("validate." + provider),
			Name:      xmlText(name),
			Time:      junitSeconds(s.Duration, s.DurationSeconds),
		}
		switch s.Result {
		case ResultFailed:
			suite.Failures++
			c.Failure = &junitFailure{
				Message: xmlText(firstLine(s.Message)),
				Type:    xmlText(s.ID),
				Text:    xmlText(failureText(s)),
			}
		case ResultSkipped:
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: xmlText(s.Message)}
		default:
			c.SystemOut = xmlText(s.Message)
		}
		suite.Cases = append(suite.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write the report as JUnit XML: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return fmt.Errorf("write the report as JUnit XML: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write the report as JUnit XML: %w", err)
	}
	return nil
}

// xmlText drops what XML 1.0 cannot carry: control characters other than
// tab, line feed and carriage return, surrogates, U+FFFE and U+FFFF, and
// bytes that are not UTF-8. Terminal escape sequences in log lines lose
// their ESC and stay readable.
func xmlText(s string) string {
	ok := func(r rune) bool {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return true
		case r < 0x20:
			return false
		case r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF:
			return false
		}
		return true
	}
	clean := true
	for i, r := range s {
		if !ok(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			continue
		}
		if ok(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// junitSeconds formats a duration as JUnit's seconds; a report decoded
// from JSON has only the seconds.
func junitSeconds(d time.Duration, secs float64) string {
	if d != 0 {
		secs = d.Seconds()
	}
	return fmt.Sprintf("%.3f", secs)
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

// formatDuration formats d for people: "1.2s" below a minute, "3m5s"
// above.
func formatDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// oneLine is the first line of s without control characters (the table
// would break on a tab), shortened to limit characters when limit > 0.
func oneLine(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, firstLine(s))
	if limit > 0 && utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit-1]) + "…"
	}
	return s
}

// orUnnamed names a report without a provider (one that failed before it
// read its spec).
func orUnnamed(provider string) string {
	if provider == "" {
		return "(unnamed provider)"
	}
	return provider
}
