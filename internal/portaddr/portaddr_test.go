package portaddr

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRead: LIDs in hex, LMCs in decimal (out of range: 0), the GIDs in
// use (zero GIDs skipped), ports in order, an unreadable port with what
// could be read.
func TestRead(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "mlx5_0/ports/2/lid"), "0x13\n")
	write(t, filepath.Join(root, "mlx5_0/ports/1/lid"), "0x12\n")
	write(t, filepath.Join(root, "mlx5_0/ports/1/lid_mask_count"), "2\n")
	write(t, filepath.Join(root, "mlx5_0/ports/2/lid_mask_count"), "9\n")
	write(t, filepath.Join(root, "mlx5_0/ports/1/gids/0"), "fe80:0000:0000:0000:0002:c903:0000:0001\n")
	write(t, filepath.Join(root, "mlx5_0/ports/1/gids/1"), "0000:0000:0000:0000:0000:0000:0000:0000\n")
	write(t, filepath.Join(root, "mlx5_0/ports/1/gids/2"), "fe80:0000:0000:0000:0002:c903:0000:0002\n")
	write(t, filepath.Join(root, "rxe0/ports/1/lid"), "garbage")
	ps := Read(root)
	if len(ps) != 3 {
		t.Fatalf("%d ports: %+v", len(ps), ps)
	}
	if ps[0].Device != "mlx5_0" || ps[0].Port != 1 || ps[0].LID != 0x12 || ps[0].LMC != 2 || len(ps[0].GIDs) != 2 || ps[0].GIDs[1][15] != 2 {
		t.Fatalf("port 1: %+v", ps[0])
	}
	if ps[1].Port != 2 || ps[1].LID != 0x13 || ps[1].LMC != 0 || ps[1].GIDs != nil {
		t.Fatalf("port 2: %+v", ps[1])
	}
	if ps[2].Device != "rxe0" || ps[2].LID != 0 {
		t.Fatalf("rxe0: %+v", ps[2])
	}
	if Read(filepath.Join(root, "missing")) != nil {
		t.Fatal("a missing root gave ports")
	}
}
