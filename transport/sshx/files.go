package sshx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/pkg/sftp"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/inventory"
)

// sftpClient returns the node's sftp session, opening one on the node's connection if needed.
func (t *Transport) sftpClient(ctx context.Context, node inventory.Node) (*nodeConn, *sftp.Client, error) {
	nc, client, err := t.conn(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.client != client {
		return nil, nil, unreachable("sftp", node, errors.New("connection replaced while opening sftp"))
	}
	if nc.sftp == nil {
		sc, err := sftp.NewClient(client, sftp.UseConcurrentReads(true))
		if err != nil {
			return nil, nil, unreachable("open sftp", node, err)
		}
		nc.sftp = sc
	}
	return nc, nc.sftp, nil
}

// remoteFault reports errors the sftp server answered with (the connection is fine): missing
// files, permissions, a full disk. Anything else is taken as a broken session.
func remoteFault(err error) bool {
	var se *sftp.StatusError
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) || errors.As(err, &se)
}

// sftpOp runs one attempt of a file transfer: remote faults come back as they are; transport
// failures drop the session and are classified unreachable so that retry re-dials.
func (t *Transport) sftpOp(ctx context.Context, node inventory.Node, what string, op func(*sftp.Client) error) error {
	nc, sc, err := t.sftpClient(ctx, node)
	if err != nil {
		return err
	}
	// Closing the sftp session is the only way to abandon a transfer midway.
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	err = op(sc)
	if !stop() {
		nc.dropSFTP(sc)
		return fmt.Errorf("%s on %s: %w", what, node.Name, ctx.Err())
	}
	if err == nil || remoteFault(err) {
		if err != nil {
			return fmt.Errorf("%s on %s: %w", what, node.Name, err)
		}
		return nil
	}
	nc.dropSFTP(sc)
	return unreachable(what, node, err)
}

func (c *nodeConn) dropSFTP(sc *sftp.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sftp == sc {
		c.sftp.Close()
		c.sftp = nil
	}
}

// Upload copies local to remote on the node with mode, creating parent folders. The file is
// written under a temporary name and renamed into place, so a reader never sees half a file and
// a retry after a broken connection is safe. Relative remote paths are relative to the login
// user's home, as for Exec.
func (t *Transport) Upload(ctx context.Context, node inventory.Node, local, remote string, mode uint32) error {
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("upload to %s: %w", node.Name, err)
	}
	defer f.Close()
	what := fmt.Sprintf("upload %s to %s", local, remote)
	return t.retry(ctx, node, "upload", func() error {
		return t.sftpOp(ctx, node, what, func(sc *sftp.Client) error {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			if err := sc.MkdirAll(path.Dir(remote)); err != nil {
				return err
			}
			tmp := remote + ".rig-upload-" + randomSuffix()
			w, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, f)
			if err == nil {
				err = w.Chmod(os.FileMode(mode))
			}
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = sc.PosixRename(tmp, remote)
			}
			if err != nil {
				sc.Remove(tmp)
			}
			return err
		})
	})
}

// Download copies a file on the node to local (written under a temporary name, then renamed).
func (t *Transport) Download(ctx context.Context, node inventory.Node, remote, local string) error {
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return fmt.Errorf("download from %s: %w", node.Name, err)
	}
	what := fmt.Sprintf("download %s to %s", remote, local)
	return t.retry(ctx, node, "download", func() error {
		// A transport failure (opErr) is returned as sftpOp classified it, for retry to act on;
		// a local one (a write, the rename) is not retried.
		var opErr, localErr error
		err := atomicfile.WriteFunc(local, func(out io.Writer) error {
			opErr = t.sftpOp(ctx, node, what, func(sc *sftp.Client) error {
				r, err := sc.Open(remote)
				if err != nil {
					return err
				}
				defer r.Close()
				_, err = r.WriteTo(writerFunc(func(p []byte) (int, error) {
					n, err := out.Write(p)
					if err != nil {
						localErr = err
					}
					return n, err
				}))
				return err
			})
			return opErr
		}, atomicfile.Options{Perm: 0o600})
		switch {
		case localErr != nil:
			return fmt.Errorf("%s: %w", what, localErr)
		case opErr != nil:
			return opErr
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
