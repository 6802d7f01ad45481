package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/latchhq/latch/controlplane/journal"
)

// progressLine prints how far a long `audit verify` is: records done, rate
// and time left, on stderr. Nothing before progressAfter (short runs stay
// quiet); then at most every progressEvery, rewriting one line on a
// terminal and writing one line each time otherwise.
type progressLine struct {
	w         io.Writer
	tty       bool
	now       func() time.Time
	start     time.Time // of the run
	stage     string
	stageAt   time.Time // when the current stage was first reported
	stageDone int64     // and how far it was then
	last      time.Time // of the last line printed
	printed   bool      // a terminal line is open
}

const (
	progressAfter = 2 * time.Second
	progressEvery = time.Second
)

func newProgressLine(w io.Writer) *progressLine {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	now := time.Now()
	return &progressLine{w: w, tty: tty, now: time.Now, start: now}
}

func (p *progressLine) update(pr journal.Progress) {
	now := p.now()
	if pr.Stage != p.stage {
		p.stage, p.stageAt, p.stageDone = pr.Stage, now, pr.Done
	}
	if now.Sub(p.start) < progressAfter || now.Sub(p.last) < progressEvery || pr.Done <= 0 {
		return
	}
	p.last = now
	line := fmt.Sprintf("audit verify: %s: %d of %d records", pr.Stage, pr.Done, pr.Total)
	if pr.Total > 0 {
		line += fmt.Sprintf(" (%d%%)", pr.Done*100/pr.Total)
	}
	if el := now.Sub(p.stageAt).Seconds(); el > 0 {
		rate := float64(pr.Done-p.stageDone) / el
		line += fmt.Sprintf(", %s records/s", humanCount(rate))
		if left := pr.Total - pr.Done; left > 0 && rate > 0 {
			line += fmt.Sprintf(", ETA %s", (time.Duration(float64(left) / rate * float64(time.Second))).Round(time.Second))
		}
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.printed = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends an open terminal line.
func (p *progressLine) done() {
	if p.printed {
		fmt.Fprintln(p.w)
		p.printed = false
	}
}

// humanCount writes 1234567 as 1.2M, 45678 as 45.7k.
func humanCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
