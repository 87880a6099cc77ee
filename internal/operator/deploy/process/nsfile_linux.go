package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// selfExe is the deployer's own executable, also when the file was
// replaced or deleted since it started.
const selfExe = "/proc/self/exe"

// namespaceCheckTimeout bounds the check run of the helper; it is generous
// because a loaded machine may take seconds to start a large binary.
const namespaceCheckTimeout = time.Minute

// namespaceAttrs are the ways to start the helper in a private mount
// namespace, in the order they are tried: as root a mount namespace is
// enough; otherwise (or when root lacks CAP_SYS_ADMIN, as in a container)
// a user namespace that maps the caller's user and group to root, the
// only way the helper, a new program, keeps the right to mount within it
// (execve drops the capabilities of any other user). The helper then
// drops every capability before it executes the provider (see
// dropCapabilities): the provider sees itself as root of its user
// namespace, but has no privilege there, and on the host it is the
// caller's user as before.
func namespaceAttrs() []*syscall.SysProcAttr {
	var attrs []*syscall.SysProcAttr
	if os.Geteuid() == 0 {
		attrs = append(attrs, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS})
	}
	return append(attrs, userNamespaceAttr())
}

// userNamespaceAttr is a user and mount namespace in which the caller's
// user and group are root.
func userNamespaceAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWNS | syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
}

// detectNamespaceFile runs the helper in check mode with each of
// namespaceAttrs and returns the first that works, or why none does.
func detectNamespaceFile(ctx context.Context) (*syscall.SysProcAttr, error) {
	return detectNamespaceFileWith(ctx, namespaceAttrs())
}

// detectNamespaceFileWith returns the first of attrs in which the helper
// can provide the namespace file.
func detectNamespaceFileWith(ctx context.Context, attrs []*syscall.SysProcAttr) (*syscall.SysProcAttr, error) {
	var errs []error
	for _, attr := range attrs {
		spec, err := json.Marshal(nsHelperSpec{Namespace: "marketplane-check", DropCapabilities: inUserNamespace(attr)})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, namespaceCheckTimeout)
		cmd := exec.CommandContext(ctx, selfExe)
		cmd.Env = []string{nsHelperEnv + "=" + string(spec)}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = withNamespaces(&syscall.SysProcAttr{}, attr)
		err = cmd.Run()
		cancel()
		if err == nil {
			return attr, nil
		}
		what := "mount namespace"
		if inUserNamespace(attr) {
			what = "user and mount namespace"
		}
		if msg := strings.TrimSpace(out.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	return nil, errors.Join(errs...)
}

// inUserNamespace reports whether attr creates a user namespace.
func inUserNamespace(attr *syscall.SysProcAttr) bool {
	return attr.Cloneflags&syscall.CLONE_NEWUSER != 0
}

// withNamespaces adds the namespaces of ns to attr and returns attr.
func withNamespaces(attr, ns *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Cloneflags |= ns.Cloneflags
	attr.UidMappings = slices.Clone(ns.UidMappings)
	attr.GidMappings = slices.Clone(ns.GidMappings)
	attr.GidMappingsEnableSetgroups = ns.GidMappingsEnableSetgroups
	return attr
}

// wrapWithNamespaceFile makes cmd start the helper in the namespaces of ns,
// which provides the namespace file and then executes what cmd would have
// executed, with the same arguments, environment, directory, process
// group and parent-death signal (all survive execve), as the same process.
func wrapWithNamespaceFile(cmd *exec.Cmd, helper nsHelperSpec, ns *syscall.SysProcAttr) error {
	if cmd.Err != nil {
		return cmd.Err // the binary was not found: Start says so
	}
	// Fail as a direct start would when the binary cannot be executed,
	// rather than in the helper, where it is only an exit code.
	path := cmd.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(cmd.Dir, path)
	}
	if info, err := os.Stat(path); err != nil {
		return err
	} else if info.IsDir() || info.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	helper.Binary, helper.DropCapabilities = cmd.Path, inUserNamespace(ns)
	spec, err := json.Marshal(helper)
	if err != nil {
		return err
	}
	cmd.Path = selfExe
	cmd.Env = append(slices.Clone(cmd.Env), nsHelperEnv+"="+string(spec))
	cmd.SysProcAttr = withNamespaces(cmd.SysProcAttr, ns)
	return nil
}

// runNamespaceHelper is the helper's main: it provides the namespace file
// in its private mount namespace and executes the provider, or in check
// mode verifies the file and exits. It returns an exit code only when it
// failed.
func runNamespaceHelper(specJSON string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "marketplane process deployer: service-account namespace file: %v\n", err)
		return nsHelperFailed
	}
	if err := os.Unsetenv(nsHelperEnv); err != nil {
		return fail(err)
	}
	var spec nsHelperSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fail(fmt.Errorf("decode %s: %w", nsHelperEnv, err))
	}
	var before []fs.DirEntry
	if spec.Binary == "" {
		before, _ = os.ReadDir("/var/run/")
	}
	if err := provideNamespaceFile(spec.Namespace); err != nil {
		return fail(err)
	}
	if err := linkServiceAccountFiles(spec); err != nil {
		return fail(err)
	}
	// Capabilities belong to a thread, and execve takes them from the
	// thread that calls it: drop them on this one and never leave it.
	runtime.LockOSThread()
	if spec.DropCapabilities {
		if err := dropCapabilities(); err != nil {
			return fail(err)
		}
	}
	if spec.Binary == "" {
		if err := checkNamespaceFile(spec.Namespace, before); err != nil {
			return fail(err)
		}
		return 0
	}
	err := syscall.Exec(spec.Binary, os.Args, os.Environ())
	return fail(fmt.Errorf("execute %s: %w", spec.Binary, err))
}

// provideNamespaceFile writes ServiceAccountNamespaceFile with namespace,
// in a tmpfs of the caller's (private) mount namespace. When the directory
// exists (a deployer in a pod), a tmpfs covers it, hiding what is there.
// Otherwise the deepest directory that exists (normally /run, as /var/run
// is a link to it) is covered by a tmpfs that mirrors it: each entry is
// bind-mounted from the covered directory (recursively, submounts
// included), symbolic links are copied, and the missing directories are
// created in the tmpfs. Entries created in that directory on the host
// after the process started are not seen by it.
func provideNamespaceFile(namespace string) error {
	if namespace == "" {
		return errors.New("no namespace")
	}
	// Never let a mount propagate to the host's mount namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	target := filepath.Dir(ServiceAccountNamespaceFile)
	base, missing := target, []string(nil)
	for {
		info, err := os.Stat(base)
		if err == nil {
			if !info.IsDir() {
				return fmt.Errorf("%s is not a directory", base)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append([]string{filepath.Base(base)}, missing...)
		base = filepath.Dir(base)
	}
	resolved, err := filepath.EvalSymlinks(base)
	if err != nil {
		return err
	}
	if resolved == "/" {
		return fmt.Errorf("none of the parents of %s exists but /", target)
	}
	if len(missing) == 0 {
		if err := syscall.Mount("tmpfs", resolved, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", resolved, err)
		}
	} else if err := mirror(resolved); err != nil {
		return err
	}
	dir := filepath.Join(append([]string{resolved}, missing...)...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "namespace"), []byte(namespace), 0o644)
}

// linkServiceAccountFiles links the token and CA of spec next to the
// namespace file, in the tmpfs provideNamespaceFile mounted. Links, not
// copies: the deployer replaces the token file when it refreshes the
// token, and client-go rereads the file it names.
func linkServiceAccountFiles(spec nsHelperSpec) error {
	dir := filepath.Dir(ServiceAccountNamespaceFile)
	for name, target := range map[string]string{"token": spec.Token, "ca.crt": spec.CA} {
		if target == "" {
			continue
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("link the service account's %s: %w", name, err)
		}
	}
	return nil
}

// mirror covers dir with a tmpfs that holds the same entries.
func mirror(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	// The covered directory stays reachable through a descriptor opened
	// before, as /proc/self/fd/<fd>/<entry>.
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer syscall.Close(fd)
	covered := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("mode=%o", st.Mode&0o7777)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	for _, e := range entries {
		src, dst := filepath.Join(covered, e.Name()), filepath.Join(dir, e.Name())
		info, err := os.Lstat(src)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, dst); err != nil {
				return err
			}
			continue
		case info.IsDir():
			err = os.Mkdir(dst, 0o755)
		default: // files, sockets, pipes, devices: a file to mount on
			err = os.WriteFile(dst, nil, 0o600)
		}
		if err != nil {
			return err
		}
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s/%s: %w", dir, e.Name(), err)
		}
	}
	return nil
}

// prCapBSetDrop is prctl's PR_CAPBSET_DROP.
const prCapBSetDrop = 24

// dropCapabilities empties the calling thread's capability bounding set,
// so that a program it executes as root of a user namespace gets no
// capabilities (root gets those of the bounding set on execve).
func dropCapabilities() error {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	for c := 0; c <= last; c++ {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapBSetDrop, uintptr(c), 0); errno != 0 {
			return fmt.Errorf("drop capability %d: %w", c, errno)
		}
	}
	return nil
}

// checkNamespaceFile verifies, the way controller-runtime reads it, that
// the file holds namespace, and that what /var/run held before is still
// there.
func checkNamespaceFile(namespace string, before []fs.DirEntry) error {
	got, err := os.ReadFile(ServiceAccountNamespaceFile)
	if err != nil {
		return err
	}
	if string(got) != namespace {
		return fmt.Errorf("%s holds %q, want %q", ServiceAccountNamespaceFile, got, namespace)
	}
	for _, e := range before {
		if _, err := os.Lstat(filepath.Join("/var/run", e.Name())); err != nil {
			return fmt.Errorf("/var/run lost an entry: %w", err)
		}
	}
	return nil
}
