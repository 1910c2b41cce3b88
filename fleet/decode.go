package fleet

import (
	segjson "github.com/segmentio/encoding/json"
)

// decodeJSON decodes a record or a heartbeat as the engine takes them:
// segmentio's encoding/json, a drop-in for the standard library's
// (the same rules: fields matched without regard to case, unknown ones
// ignored, invalid UTF-8 replaced) at a quarter of its CPU
// (BenchmarkRecordDecode); the records are most of an instance's work.
func decodeJSON(data []byte, v any) error { return segjson.Unmarshal(data, v) }
