package vm

import (
	"bytes"
	"strconv"
	"testing"
)

// readNewc parses a newc archive into name -> (mode, data).
func readNewc(t *testing.T, b []byte) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	for off := 0; ; {
		if off%4 != 0 {
			t.Fatalf("header at unaligned offset %d", off)
		}
		h := string(b[off : off+110])
		if h[:6] != "070701" {
			t.Fatalf("bad magic at %d: %q", off, h[:6])
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(h[6+8*i:14+8*i], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(v)
		}
		mode, size, nameSize := field(1), field(6), field(11)
		name := string(b[off+110 : off+110+nameSize-1])
		off = (off + 110 + nameSize + 3) &^ 3
		data := b[off : off+size]
		off = (off + size + 3) &^ 3
		if name == "TRAILER!!!" {
			return out
		}
		e := Entry{Name: name}
		switch mode & 0o170000 {
		case 0o040000:
			e.Dir = true
		case 0o120000:
			e.Link = string(data)
		default:
			e.Data = data
		}
		out[name] = e
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	a := NewArchive()
	a.File("/etc/lab/cmd", 0o644, []byte("exit 3\n"))
	a.File("usr/bin/x", 0o755, []byte("12345")) // odd size: needs padding
	a.Symlink("bin", "usr/bin")
	a.Dir("extra")
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, buf.Bytes())
	for _, d := range []string{"etc", "etc/lab", "usr", "usr/bin", "extra"} {
		if !got[d].Dir {
			t.Errorf("%s: want a directory entry, got %+v", d, got[d])
		}
	}
	if string(got["etc/lab/cmd"].Data) != "exit 3\n" || string(got["usr/bin/x"].Data) != "12345" {
		t.Errorf("file contents wrong: %+v", got)
	}
	if got["bin"].Link != "usr/bin" {
		t.Errorf("bin: want symlink to usr/bin, got %+v", got["bin"])
	}
	if len(got) != 8 {
		t.Errorf("want 8 entries, got %d: %v", len(got), got)
	}
}

func TestArchiveIsReproducible(t *testing.T) {
	build := func(order []string) []byte {
		a := NewArchive()
		for _, n := range order {
			a.File(n, 0o644, []byte(n))
		}
		var buf bytes.Buffer
		a.WriteTo(&buf)
		return buf.Bytes()
	}
	if !bytes.Equal(build([]string{"a/x", "b/y", "c"}), build([]string{"c", "b/y", "a/x"})) {
		t.Error("archive depends on the order files were added")
	}
}

func TestAddTree(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/sub/f.txt", "hello")
	a := NewArchive()
	if err := AddTree(a, "extra", dir); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	a.WriteTo(&buf)
	got := readNewc(t, buf.Bytes())
	if string(got["extra/sub/f.txt"].Data) != "hello" || !got["extra/sub"].Dir {
		t.Errorf("tree not archived: %v", got)
	}
	if err := AddTree(a, "extra", dir+"/sub/f.txt"); err == nil {
		t.Error("a file as LAB_EXTRA: want an error")
	}
}
