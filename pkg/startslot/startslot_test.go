package startslot

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestSlots: with two slots, a third start waits until one is released,
// and a start of another process counts too.
func TestSlots(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv(EnvSlots, "2")
	ctx := t.Context()
	first, err := Acquire(ctx)
	if err != nil {
		t.Fatalf("first slot: %v", err)
	}
	second, err := Acquire(ctx)
	if err != nil {
		t.Fatalf("second slot: %v", err)
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third slot while two are held: %v, want it to wait until its context ends", err)
	}

	first()
	third, err := Acquire(ctx)
	if err != nil {
		t.Fatalf("a slot after one was released: %v", err)
	}
	third()
	second()
}

// TestSlotsAcrossProcesses: a slot held by another process is not free
// until that process ends.
func TestSlotsAcrossProcesses(t *testing.T) {
	if os.Getenv("STARTSLOT_HOLDER") == "1" {
		if _, err := Acquire(context.Background()); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("held\n")
		// Held until the parent closes stdin.
		_, _ = os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv(EnvSlots, "1")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlotsAcrossProcesses$")
	cmd.Env = append(os.Environ(), "STARTSLOT_HOLDER=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child says when it holds the slot.
	buf := make([]byte, 5)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("holder process: %q, %v", buf, err)
	}
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the only slot, held by another process: %v, want a wait until the context ends", err)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder process: %v", err)
	}
	release, err := Acquire(t.Context())
	if err != nil {
		t.Fatalf("the slot after its holder ended: %v", err)
	}
	release()
}
