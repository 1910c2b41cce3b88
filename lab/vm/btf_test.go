package vm

import (
	"encoding/base64"
	"reflect"
	"testing"
)

func TestParseBTFOutput(t *testing.T) {
	a, b := []byte("BTF of ib_core"), []byte{0, 1, 2, 250}
	out := "ib_core: written: /var/lib/apmwatch/btf/5.10.0-46-amd64/ib_core.btf (pahole ...)\r\n" +
		"@btf ib_core.btf\n" + base64.StdEncoding.EncodeToString(a) + "\r\n@end\n" +
		"@btf mlx5_core.btf\n" + base64.StdEncoding.EncodeToString(b)[:4] + "\n" + base64.StdEncoding.EncodeToString(b)[4:] + "\n@end\n"
	files, report, err := parseBTFOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(files, map[string][]byte{"ib_core.btf": a, "mlx5_core.btf": b}) {
		t.Errorf("files: %q", files)
	}
	if len(report) != 1 || report[0] != "ib_core: written: /var/lib/apmwatch/btf/5.10.0-46-amd64/ib_core.btf (pahole ...)" {
		t.Errorf("report: %q", report)
	}
	for _, bad := range []string{"@btf ../x.btf\nAA==\n@end\n", "@btf x.txt\n@end\n", "@btf x.btf\nAA==\n", "@btf x.btf\n!!\n@end\n"} {
		if _, _, err := parseBTFOutput(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
