package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// isTerminal reports whether w is a terminal (a character device), where
// progress lines are rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// spinnerFrames turn on a terminal while a step runs.
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// progressPrinter shows the steps of a command that waits (validate,
// landscape up and down). On a terminal the running step has a line with a
// spinner and its elapsed seconds, redrawn by a ticker and replaced by the
// outcome when the step ends; elsewhere (a file, CI) each step gets one
// line when it ends.
type progressPrinter struct {
	out      io.Writer
	tty      bool
	interval time.Duration

	mu      sync.Mutex
	title   string
	started time.Time
	frame   int
	// drawn is true while the terminal's last line is a running step's.
	drawn bool
	// stop ends the ticker goroutine, which closes done when it has.
	stop, done chan struct{}
}

func newProgressPrinter(out io.Writer, tty bool) *progressPrinter {
	return &progressPrinter{out: out, tty: tty, interval: 100 * time.Millisecond}
}

// begin shows a step that starts: on a terminal, its running line.
func (p *progressPrinter) begin(title string) {
	p.stopTicker()
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.title, p.started, p.frame = title, time.Now(), 0
	p.drawLocked()
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.tick(p.stop, p.done)
}

// end replaces the running step's line, if any, by line, the step's
// outcome.
func (p *progressPrinter) end(line string) {
	p.stopTicker()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintln(p.out, line)
}

// println writes a line that is no step's outcome (a notice while a step
// runs) above the running step's line, which stays.
func (p *progressPrinter) println(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	running := p.drawn
	p.clearLocked()
	fmt.Fprintln(p.out, line)
	if running {
		p.drawLocked()
	}
}

// tick redraws the running step's line until stop is closed.
func (p *progressPrinter) tick(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.drawLocked()
			p.mu.Unlock()
		}
	}
}

// drawLocked (re)writes the running step's line; p.mu is held.
func (p *progressPrinter) drawLocked() {
	fmt.Fprintf(p.out, "\r\033[K%s %s (%ds)", spinnerFrames[p.frame%len(spinnerFrames)], p.title, int(time.Since(p.started).Seconds()))
	p.drawn = true
}

// clearLocked erases the running step's line, if drawn; p.mu is held.
func (p *progressPrinter) clearLocked() {
	if p.drawn {
		fmt.Fprint(p.out, "\r\033[K")
		p.drawn = false
	}
}

// stopTicker stops the ticker goroutine, if one runs, and waits for it.
func (p *progressPrinter) stopTicker() {
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop, p.done = nil, nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// close stops the ticker; a step line left running (the run was
// interrupted) stays, ended by a line break.
func (p *progressPrinter) close() {
	p.stopTicker()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.out)
		p.drawn = false
	}
}

// landscapeProgress turns the output of the landscape's start and of down
// into steps of a progressPrinter. Each progress line of the landscape
// ("• starting etcd") is a step that lasts until the next one; notices
// (a process of the landscape exited or was restarted, a recorded port was
// taken) are printed as they come and end no step. Other lines (the
// summary, an error) that come while a step runs are held until the step
// ends, so that they follow its outcome. Once finish is called, lines pass
// through as they come. It is an io.Writer safe for concurrent use.
type landscapeProgress struct {
	p *progressPrinter

	mu       sync.Mutex
	partial  []byte
	step     string
	started  time.Time
	held     []string
	finished bool
	// now is the clock, replaced in tests.
	now func() time.Time
}

func newLandscapeProgress(out io.Writer, tty bool) *landscapeProgress {
	return &landscapeProgress{p: newProgressPrinter(out, tty), now: time.Now}
}

// progressMark starts each progress line of the landscape (landscape's
// progressf, and Down).
const progressMark = "• "

// Write handles the complete lines of b; the rest waits for its line's end.
func (l *landscapeProgress) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.lineLocked(line)
	}
}

// lineLocked handles one line; l.mu is held.
func (l *landscapeProgress) lineLocked(line string) {
	text, isProgress := strings.CutPrefix(line, progressMark)
	switch {
	case l.finished:
		l.p.println(line)
	case isProgress && landscapeNotice(text):
		l.p.println(line)
	case isProgress:
		l.endLocked("✓")
		l.step, l.started = text, l.now()
		l.p.begin(text)
	case l.step != "":
		l.held = append(l.held, line)
	default:
		l.p.println(line)
	}
}

// endLocked ends the running step, if any, with mark, then prints the
// lines held while it ran; l.mu is held.
func (l *landscapeProgress) endLocked(mark string) {
	if l.step != "" {
		l.p.end(fmt.Sprintf("%s %s (%s)", mark, l.step, formatSeconds(l.now().Sub(l.started))))
		l.step = ""
	}
	for _, h := range l.held {
		l.p.println(h)
	}
	l.held = nil
}

// finish ends the running step, as done when err is nil and as failed
// otherwise, prints what was held and what is left of a line, and lets
// later lines pass through.
func (l *landscapeProgress) finish(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	l.endLocked(mark)
	if len(l.partial) > 0 {
		l.p.println(string(l.partial))
		l.partial = nil
	}
	l.finished = true
	l.p.close()
}

// landscapeNotice reports whether a progress line of the landscape is a
// notice rather than a step: the lines of landscape.processEvent (a
// process exited, was restarted, or could not be) and of a recorded port
// that was taken (controlplane.MoveTakenPorts).
func landscapeNotice(text string) bool {
	return strings.Contains(text, "; restarting it in ") ||
		strings.HasPrefix(text, "restarted ") ||
		(strings.HasPrefix(text, "restarting ") && strings.Contains(text, " failed, trying again in ")) ||
		strings.Contains(text, " is taken by another process; using ")
}
