// Package rotationtest lays out files as the kubelet mounts a Secret, and
// updates them as it does, for the tests of secret files read again.
package rotationtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// KubeSecret is a directory laid out as the kubelet mounts a Secret: each
// key is a link to ..data/<key>, and ..data a link to a timestamped
// directory holding the values.
type KubeSecret struct {
	t   testing.TB
	dir string
	n   int
}

// NewKubeSecret mounts values (key → file content, written as given).
func NewKubeSecret(t testing.TB, values map[string]string) *KubeSecret {
	t.Helper()
	k := &KubeSecret{t: t, dir: t.TempDir()}
	k.Update(values)
	for key := range values {
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(k.dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// Path is where key's file is, as a pod sees it.
func (k *KubeSecret) Path(key string) string { return filepath.Join(k.dir, key) }

// Update swaps values in as the kubelet does: a new timestamped directory,
// a ..data_tmp link to it renamed over ..data, the old directory removed.
// Every key mounted must be among values.
func (k *KubeSecret) Update(values map[string]string) {
	k.t.Helper()
	k.n++
	ts := fmt.Sprintf("..2026_12_03_10_%02d_17.%09d", k.n, 100+k.n)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o755); err != nil {
		k.t.Fatal(err)
	}
	for key, v := range values {
		if err := os.WriteFile(filepath.Join(k.dir, ts, key), []byte(v), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(k.dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(k.dir, "..data_tmp")); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(k.dir, "..data_tmp"), filepath.Join(k.dir, "..data")); err != nil {
		k.t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(k.dir, old)); err != nil {
			k.t.Fatal(err)
		}
	}
}
