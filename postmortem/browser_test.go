package postmortem

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTMLInChromium renders the page in headless Chromium (Debian's
// chromium; `make html-test` installs it) and checks the screenshot is not
// blank. Run with APMWATCH_BROWSER=1.
func TestHTMLInChromium(t *testing.T) {
	if os.Getenv("APMWATCH_BROWSER") != "1" {
		t.Skip("set APMWATCH_BROWSER=1 (needs chromium)")
	}
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: apt-get install -y chromium")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, goldenPair(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1280,900"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(flags, "--screenshot="+shot, "file://"+page)...).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colors := map[uint32]int{}
	bounds := img.Bounds()
	nonWhite := 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[(r>>8)<<16|(g>>8)<<8|b>>8]++
			if r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
				nonWhite++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy() / 4
	t.Logf("screenshot %dx%d: %d colours, %.1f%% not white", bounds.Dx(), bounds.Dy(), len(colors), 100*float64(nonWhite)/float64(total))
	if len(colors) < 20 || nonWhite < total/50 {
		t.Fatalf("the screenshot looks blank: %d colours, %d of %d sampled pixels not white", len(colors), nonWhite, total)
	}
	// the script ran and the timeline is in the DOM
	dom, err := exec.CommandContext(ctx, bin, append(flags, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if !strings.Contains(string(dom), "<svg") || !strings.Contains(string(dom), `id="tip"`) {
		t.Fatal("the rendered DOM has no timeline")
	}
	if keep := os.Getenv("APMWATCH_SCREENSHOT"); keep != "" {
		data, _ := os.ReadFile(shot)
		os.WriteFile(keep, data, 0o644)
	}
}
