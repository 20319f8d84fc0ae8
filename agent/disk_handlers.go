package agent

import (
	"context"
	"errors"
	"net/http"

	"github.com/rig-dev/rig/agent/disk"
)

// POST /v1/disk prepares the node's data volume (find, make a filesystem if it has none, mount);
// POST /v1/disk/check measures a mounted volume with fio (or answers with its kept result);
// POST /v1/disk/unmount syncs and unmounts it (rig down does this before destroying the stack).
func (s *Server) registerDiskHandlers() {
	s.mux.HandleFunc("POST "+APIVersion+"/disk/unmount", func(w http.ResponseWriter, r *http.Request) {
		var o disk.UnmountOptions
		if err := readJSON(r, &o); err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		res, err := disk.Unmount(r.Context(), o)
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, res)
		case errors.Is(err, disk.ErrBadOption):
			writeErr(w, http.StatusBadRequest, err)
		case errors.Is(err, disk.ErrInUse):
			writeErr(w, http.StatusConflict, err)
		default:
			writeErr(w, http.StatusInternalServerError, err)
		}
	})
	s.mux.HandleFunc("POST "+APIVersion+"/disk/check", func(w http.ResponseWriter, r *http.Request) {
		var o disk.CheckOptions
		if err := readJSON(r, &o); err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		res, err := disk.Check(r.Context(), o)
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, res)
		case errors.Is(err, disk.ErrBadOption):
			writeErr(w, http.StatusBadRequest, err)
		default:
			writeErr(w, http.StatusInternalServerError, err)
		}
	})
	s.mux.HandleFunc("POST "+APIVersion+"/disk", func(w http.ResponseWriter, r *http.Request) {
		var o disk.Options
		if err := readJSON(r, &o); err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		o.Root = s.opts.Root
		res, err := disk.Prepare(r.Context(), o)
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, res)
		case errors.Is(err, disk.ErrBadOption):
			writeErr(w, http.StatusBadRequest, err)
		case errors.Is(err, disk.ErrNotFound):
			writeErr(w, http.StatusNotFound, err)
		case errors.Is(err, disk.ErrInUse), errors.Is(err, disk.ErrOtherFS), errors.Is(err, disk.ErrNoFS):
			writeErr(w, http.StatusConflict, err)
		default:
			writeErr(w, http.StatusInternalServerError, err)
		}
	})
}

// Disk prepares the node's data volume.
func (c *Client) Disk(ctx context.Context, o disk.Options) (disk.Result, error) {
	var out disk.Result
	err := c.do(ctx, http.MethodPost, "/disk", o, &out)
	return out, err
}

// Unmount syncs and unmounts the data volume at a mount point; nothing mounted there is no error.
func (c *Client) Unmount(ctx context.Context, o disk.UnmountOptions) (disk.UnmountResult, error) {
	var out disk.UnmountResult
	err := c.do(ctx, http.MethodPost, "/disk/unmount", o, &out)
	return out, err
}

// DiskCheck measures the volume mounted at o.Dir with fio on the node (disk.Check).
func (c *Client) DiskCheck(ctx context.Context, o disk.CheckOptions) (disk.Measured, error) {
	var out disk.Measured
	err := c.do(ctx, http.MethodPost, "/disk/check", o, &out)
	return out, err
}
