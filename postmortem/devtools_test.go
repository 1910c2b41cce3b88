package postmortem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// devtools is a client of the DevTools protocol over Chromium's
// --remote-debugging-pipe: JSON messages ended by a NUL byte, on fd 3 (to
// the browser) and fd 4 (from it).
type devtools struct {
	to      *os.File
	from    *bufio.Reader
	id      int
	session string
	stop    func() // ends the browser (once)
}

func startChromium(t *testing.T, ctx context.Context, bin, dir string) *devtools {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--remote-debugging-pipe", "about:blank")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{inR, outW}
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	inR.Close()
	outW.Close()
	c := &devtools{to: inW, from: bufio.NewReader(outR)}
	c.stop = sync.OnceFunc(func() {
		inW.Close()
		cmd.Process.Kill()
		cmd.Wait()
		outR.Close()
		if t.Failed() {
			t.Logf("chromium's stderr:\n%s", stderr.Bytes())
		}
	})
	t.Cleanup(c.stop)
	var target struct {
		TargetID string `json:"targetId"`
	}
	c.call(t, "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	c.call(t, "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	c.session = att.SessionID
	return c
}

// call sends one command and waits for its answer, skipping events.
func (c *devtools) call(t *testing.T, method string, params, result any) {
	t.Helper()
	c.id++
	msg := map[string]any{"id": c.id, "method": method, "params": params}
	if c.session != "" {
		msg["sessionId"] = c.session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.to.Write(append(b, 0)); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	for {
		line, err := c.from.ReadBytes(0)
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", method, err)
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line[:len(line)-1], &resp); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if resp.ID != c.id {
			continue
		}
		if resp.Error != nil {
			t.Fatalf("%s: %s", method, resp.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(resp.Result, result); err != nil {
				t.Fatalf("%s: %v", method, err)
			}
		}
		return
	}
}

// eval evaluates a JavaScript expression in the page and returns its value.
func (c *devtools) eval(t *testing.T, expr string) any {
	t.Helper()
	var res struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	c.call(t, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res)
	if res.Exception != nil {
		t.Fatalf("%s: %s %s", expr, res.Exception.Text, res.Exception.Exception.Description)
	}
	return res.Result.Value
}

type box struct{ X, Y, W, H float64 }

// rect is the viewport box of the element an expression gives.
func (c *devtools) rect(t *testing.T, el string) box {
	t.Helper()
	v := c.eval(t, `(function () { var r = (`+el+`).getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`).([]any)
	return box{v[0].(float64), v[1].(float64), v[2].(float64), v[3].(float64)}
}

// click presses and releases the left button at the centre of b.
func (c *devtools) click(t *testing.T, b box) {
	t.Helper()
	x, y := b.X+b.W/2, b.Y+b.H/2
	if b.W > 60 {
		x = b.X + 20 // a table row: its first cells
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": x, "y": y, "button": "left", "clickCount": 1}, nil)
	}
}

// key presses and releases a key (a name of KeyboardEvent.key such as "Enter").
func (c *devtools) key(t *testing.T, key string) {
	t.Helper()
	codes := map[string]int{"Enter": 13}
	for _, typ := range []string{"rawKeyDown", "keyUp"} {
		c.call(t, "Input.dispatchKeyEvent", map[string]any{"type": typ, "key": key, "code": key, "windowsVirtualKeyCode": codes[key]}, nil)
	}
}

// drag presses the left button at (x1, y), moves to x2 and releases.
func (c *devtools) drag(t *testing.T, x1, x2, y float64) {
	t.Helper()
	c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": x1, "y": y}, nil)
	c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mousePressed", "x": x1, "y": y, "button": "left", "clickCount": 1}, nil)
	for i := 1; i <= 5; i++ {
		c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": x1 + (x2-x1)*float64(i)/5, "y": y, "button": "left", "buttons": 1}, nil)
	}
	c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mouseReleased", "x": x2, "y": y, "button": "left", "clickCount": 1}, nil)
}

// screenshot saves the viewport (or the whole page) as a PNG.
func (c *devtools) screenshot(t *testing.T, path string, full bool) []byte {
	t.Helper()
	params := map[string]any{"format": "png"}
	if full {
		var m struct {
			Size struct {
				Width, Height float64
			} `json:"cssContentSize"`
		}
		c.call(t, "Page.getLayoutMetrics", map[string]any{}, &m)
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": m.Size.Width, "height": m.Size.Height, "scale": 1}
	}
	var res struct {
		Data string `json:"data"`
	}
	c.call(t, "Page.captureScreenshot", params, &res)
	img, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return img
}
