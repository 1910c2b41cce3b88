package natsserver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"golang.org/x/sys/unix"
)

// Who may do what on the fleet's NATS. The permissions follow the subject
// grammar (subjects.go): a host publishes its own subjects only, the fleet
// reads the streams and publishes its findings; nobody but an operator
// administers JetStream (deletes, purges or changes a stream).

// AccountName is the NATS account apmwatch's users live in (docs/fleet.md):
// an account of its own, so that nothing else sees its subjects.
const AccountName = "APMWATCH"

// HostInboxPrefix is where a host's replies come (--nats-inbox-prefix): a
// host may subscribe there only, so it reads no one else's replies (the
// fleet's consumers deliver to inboxes too).
func HostInboxPrefix(host string) string { return "_INBOX_" + wire.Token(host) }

// hostPermissions are a host's: publish its records and finding lines
// (apmwatch.conn.<partition>.<host>.<device>.<qpn>,
// apmwatch.finding.host.<host>), find the streams, read its own last
// records back (a consumer whose one filter is its own subjects: the
// filter is part of the API subject; its messages and its deletion go by
// the consumer's name, which no host can list), and receive replies on
// its own inbox.
func hostPermissions(host string) *server.Permissions {
	h := wire.Token(host)
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			wire.ConnPrefix + "*." + h + ".*.*",
			wire.HostFindingPrefix + h,
			"$JS.API.STREAM.NAMES",
			"$JS.API.CONSUMER.CREATE.*.*." + wire.ConnPrefix + "*." + h + ".>",
			"$JS.API.CONSUMER.MSG.NEXT.*.*",
			"$JS.API.CONSUMER.DELETE.*.*",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{HostInboxPrefix(host) + ".>"}},
	}
}

// fleetPermissions are a fleet instance's (and fleet status's, postmortem
// --nats's): create apmwatch's two streams, read any stream through
// consumers, publish the fleet's findings, and keep the shares' leases
// (lease.go).
func fleetPermissions() *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			wire.FleetFindingPfx + "*",
			"$JS.API.STREAM.NAMES",
			"$JS.API.STREAM.INFO.*",
			"$JS.API.STREAM.CREATE." + wire.ConnStream,
			"$JS.API.STREAM.CREATE." + wire.FindingsStream,
			"$JS.API.CONSUMER.CREATE.*.>",
			"$JS.API.CONSUMER.MSG.NEXT.*.*",
			"$JS.API.CONSUMER.INFO.*.*",
			"$JS.API.CONSUMER.DELETE.*.*",
			"$JS.API.INFO",
			"$JS.API.STREAM.CREATE.KV_" + wire.LeaseBucket,
			"$JS.API.STREAM.UPDATE.KV_" + wire.LeaseBucket,
			"$JS.API.DIRECT.GET.KV_" + wire.LeaseBucket + ".>",
			"$KV." + wire.LeaseBucket + ".>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
}

// localPermissions are those of a client without credentials on an
// embedded server without users (loopback only): any host's subjects and
// the fleet's, reading through consumers, the leases of the bucket the
// embedded fleet made; no stream created, changed, purged or deleted.
func localPermissions() *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			wire.ConnPrefix + "*.*.*.*",
			wire.HostFindingPrefix + "*",
			wire.FleetFindingPfx + "*",
			"$JS.API.STREAM.NAMES",
			"$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.CREATE.*.>",
			"$JS.API.CONSUMER.MSG.NEXT.*.*",
			"$JS.API.CONSUMER.INFO.*.*",
			"$JS.API.CONSUMER.DELETE.*.*",
			"$JS.API.INFO",
			"$JS.API.DIRECT.GET.KV_" + wire.LeaseBucket + ".>",
			"$KV." + wire.LeaseBucket + ".>",
		}},
	}
}

// maxAuthFile bounds the authorization file (10,000 hosts take about 4 MB).
const maxAuthFile = 16 << 20

// auth is what the embedded server takes from --auth.
type auth struct {
	opts    *server.Options
	account string // where the fleet's own user goes ("": the global account)
}

var includeRe = regexp.MustCompile(`(?m)^\s*include\b`)

// LoadAuth reads the authorization file: NATS configuration with
// accounts and authorization only (users with passwords or NKeys and
// their permissions). It must be this user's or root's, and neither
// writable by others nor readable by everyone (it may hold passwords).
func LoadAuth(path string) (*auth, error) {
	b, err := readAuthFile(path)
	if err != nil {
		return nil, err
	}
	text := string(b)
	if includeRe.MatchString(text) {
		return nil, fmt.Errorf("--auth %s: include is not taken: one self-contained file", path)
	}
	m, err := conf.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("--auth %s: %s", path, oneLine(err.Error()))
	}
	var other []string
	for k := range m {
		if k != "accounts" && k != "authorization" {
			other = append(other, k)
		}
	}
	if len(other) > 0 {
		sort.Strings(other)
		return nil, fmt.Errorf("--auth %s: only accounts and authorization are taken, not %s", path, escape.Text(strings.Join(other, ", ")))
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(text); err != nil {
		return nil, fmt.Errorf("--auth %s: %s", path, oneLine(err.Error()))
	}
	switch {
	case opts.Username != "" || opts.Password != "" || opts.Authorization != "":
		return nil, fmt.Errorf("--auth %s: a single user or a token is not taken: give users (with passwords or nkeys) and their permissions", path)
	case opts.NoAuthUser != "":
		return nil, fmt.Errorf("--auth %s: no_auth_user is not taken: every client authenticates", path)
	case len(opts.Users)+len(opts.Nkeys) == 0:
		return nil, fmt.Errorf("--auth %s: no users", path)
	}
	a := &auth{opts: opts}
	for _, acc := range opts.Accounts {
		if acc.Name == AccountName {
			a.account = AccountName
		}
	}
	if a.account == "" {
		for _, u := range opts.Users {
			if u.Account != nil {
				return nil, fmt.Errorf("--auth %s: put apmwatch's users in an account named %s", path, AccountName)
			}
		}
		for _, u := range opts.Nkeys {
			if u.Account != nil {
				return nil, fmt.Errorf("--auth %s: put apmwatch's users in an account named %s", path, AccountName)
			}
		}
	}
	return a, nil
}

// readAuthFile reads path, refusing a link, another user's file, a file
// others may write or everyone may read, or one past maxAuthFile.
func readAuthFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("--auth %s is a symbolic link: refusing it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("--auth: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--auth: %w", err)
	}
	if err := authFileMode(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAuthFile+1))
	if err != nil {
		return nil, fmt.Errorf("--auth: %w", err)
	}
	if len(b) > maxAuthFile {
		return nil, fmt.Errorf("--auth %s is longer than %d bytes", path, maxAuthFile)
	}
	return b, nil
}

func authFileMode(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--auth %s is not a regular file", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("--auth %s is owned by uid %d, neither this user nor root: refusing it", path, st.Uid)
	}
	if fi.Mode().Perm()&0o026 != 0 {
		return fmt.Errorf("--auth %s is writable by others or readable by everyone (%v): chmod 600 or 640 it", path, fi.Mode().Perm())
	}
	return nil
}

// AddMarker is the line of the authorization file before which
// `apmwatch fleet add-host` adds users.
const AddMarker = "# apmwatch fleet add-host adds users above this line"

// AuthSkeleton is a new authorization file.
const AuthSkeleton = `# The users of the fleet's NATS (NATS configuration: apmwatch fleet --auth
# FILE takes it as is; a nats-server includes it). Hosts publish their own
# subjects only; the fleet user reads the streams (docs/fleet.md, Security).
accounts {
  ` + AccountName + ` {
    jetstream: enabled
    users: [
      ` + AddMarker + `
    ]
  }
}
`

// userEntry is a user as the authorization file holds it: its NKey's
// public key, and the permissions of a host or (fleet) of the fleet.
func userEntry(indent, name string, fleet bool, publicKey string) string {
	p, who := fleetPermissions(), "fleet instances, fleet status, postmortem --nats: user "+wire.Token(name)
	if !fleet {
		p, who = hostPermissions(name), "host "+wire.Token(name)+": apmwatch audit --host "+wire.Token(name)+" --nats-inbox-prefix "+HostInboxPrefix(name)
	}
	// subjects quoted, lines wrapped before 100 columns
	list := func(key string, subjects []string) string {
		lead := indent + "    " + key + ": ["
		var b strings.Builder
		line := lead
		for i, s := range subjects {
			q := `"` + s + `"`
			if i < len(subjects)-1 {
				q += ","
			}
			if line != lead && len(line)+1+len(q) > 100 {
				b.WriteString(line + "\n")
				line = indent + "      "
			} else if line != lead {
				line += " "
			}
			line += q
		}
		b.WriteString(line + "]")
		return b.String()
	}
	return fmt.Sprintf("%s# %s\n%s{ nkey: %q, permissions: {\n%s\n%s } }\n",
		indent, who, indent, publicKey, list("publish", p.Publish.Allow), list("subscribe", p.Subscribe.Allow))
}

// NewUser is what AddUser made.
type NewUser struct {
	PublicKey   string
	Token       string // the host's subject token
	InboxPrefix string // the host's --nats-inbox-prefix
	Created     bool   // the authorization file was created
}

// AddUser makes an NKey user for a host (or, with fleet, for fleet
// instances and readers), adds its public key and permissions to the
// authorization file authPath (created when missing, 0600) before its
// AddMarker line, and writes the seed to seedPath (a new file, 0600). The
// file is checked as the server would load it before it replaces the old
// one; nothing is left half-done.
func AddUser(authPath, seedPath, name string, fleet bool) (*NewUser, error) {
	if name == "" || len(name) > 64 {
		return nil, errors.New("the name must be 1 to 64 characters")
	}
	var old []byte
	created := false
	if fi, err := os.Lstat(authPath); errors.Is(err, fs.ErrNotExist) {
		old, created = []byte(AuthSkeleton), true
	} else if err != nil {
		return nil, fmt.Errorf("--auth: %w", err)
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("--auth %s is a symbolic link: refusing it", authPath)
	} else if old, err = readAuthFile(authPath); err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("making an nkey: %w", err)
	}
	defer kp.Wipe()
	pub, _ := kp.PublicKey()
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("making an nkey: %w", err)
	}
	text, err := InsertUser(string(old), name, fleet, pub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", authPath, err)
	}

	dir := filepath.Dir(authPath)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(authPath)+".*")
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", authPath, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing %s: %w", authPath, err)
	}
	// a new file is 0600; an existing one keeps its group and its mode
	// (0640 root:apmwatch, say)
	mode, gid := fs.FileMode(0o600), -1
	if fi, err := os.Stat(authPath); err == nil && !created {
		mode = fi.Mode().Perm() &^ 0o026
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			gid = int(st.Gid)
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing %s: %w", authPath, err)
	}
	if gid >= 0 {
		_ = tmp.Chown(-1, gid) // as it was when allowed; the mode holds otherwise
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing %s: %w", authPath, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", authPath, err)
	}
	if _, err := LoadAuth(tmp.Name()); err != nil {
		return nil, fmt.Errorf("%s with the new user does not load: %v", authPath, err)
	}
	if err := writeSeed(seedPath, seed); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), authPath); err != nil {
		os.Remove(seedPath)
		return nil, fmt.Errorf("writing %s: %w", authPath, err)
	}
	return &NewUser{PublicKey: pub, Token: wire.Token(name), InboxPrefix: HostInboxPrefix(name), Created: created}, nil
}

// InsertUser adds a user's entry to an authorization file's text, before
// its AddMarker line, as AddUser does.
func InsertUser(text, name string, fleet bool, publicKey string) (string, error) {
	if !fleet && strings.Contains(text, `"`+wire.HostFindingPrefix+wire.Token(name)+`"`) {
		return "", fmt.Errorf("host %s is already in it", wire.Token(name))
	}
	i := strings.Index(text, AddMarker)
	if i < 0 {
		return "", fmt.Errorf("no line %q: add the user by hand (docs/fleet.md, Security)", AddMarker)
	}
	lineStart := strings.LastIndexByte(text[:i], '\n') + 1
	indent := text[lineStart:i]
	if strings.TrimSpace(indent) != "" {
		indent = "      "
	}
	return text[:lineStart] + userEntry(indent, name, fleet, publicKey) + text[lineStart:], nil
}

// writeSeed writes a new seed file, 0600; an existing file or a link is
// refused, never overwritten.
func writeSeed(path string, seed []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("seed file %s exists: refusing to overwrite it (give another --seed)", path)
	}
	if err != nil {
		return fmt.Errorf("writing the seed: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("writing the seed: %w", err)
	}
	_, err = f.Write(append(seed, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing the seed: %w", err)
	}
	return nil
}
