package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// File modes of what download_file creates.
const (
	downloadFileMode fs.FileMode = 0o644
	downloadDirMode  fs.FileMode = 0o755
	// dataDir is tooldispatch's data directory inside the workspace, which
	// the tools do not write into.
	dataDir = ".tooldispatch"
	// errorBodyBytes is how much of an error response download_file reads
	// to quote it.
	errorBodyBytes = 64 << 10
)

const downloadFileSchema = `{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The http(s) URL to download. May contain ${secret:NAME} references."},
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Where to save the file, relative to the workspace root; missing directories are created."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 50, "description": "Request headers; values may contain ${secret:NAME}."},
    "overwrite": {"type": "boolean", "description": "Replace the file if it exists (default false)."}
  },
  "required": ["url", "path"],
  "additionalProperties": false
}`

func (w *Web) downloadFileTool() toolkit.Tool {
	return toolkit.Tool{
		Name: DownloadFileName,
		Description: fmt.Sprintf("Download a URL (GET) into a file of the workspace, up to %s. Needs the user's approval. "+
			"Returns the size, type and SHA-256 of what was saved. To read a page instead, use fetch_page.",
			toolkit.HumanSize(w.cfg.DownloadMaxBytes)),
		Schema:     json.RawMessage(downloadFileSchema),
		Concurrent: true,
		ReadOnly:   false,
		Timeout:    w.cfg.DownloadTimeout + toolGrace,
		Handler:    w.downloadFile,
		Paths:      w.downloadPaths,
		// The approval is bound to the file as the preview saw it.
		Preview:   w.downloadPreview,
		FileState: w.downloadState,
	}
}

func (w *Web) downloadFile(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	r := w.redactorFor(c)
	res, err := w.downloadFileRun(ctx, c, r)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = errors.New(redact(r, err.Error()))
	}
	res.Content = redact(r, res.Content)
	return res, err
}

func (w *Web) downloadFileRun(ctx context.Context, c *toolkit.Call, r Redactor) (toolkit.Result, error) {
	rel, err := w.downloadPath(c.Args.String("path"))
	if err != nil {
		return toolkit.Result{}, err
	}
	rawURL := strings.TrimSpace(c.Args.String("url"))
	headers, err := headerArgs(c.Args)
	if err != nil {
		return toolkit.Result{}, err
	}
	req, err := w.buildRequest(ctx, http.MethodGet, rawURL, headers, "")
	if err != nil {
		return toolkit.Result{}, err
	}
	if tu, err := url.Parse(rawURL); err == nil && carriesCredentials(rawURL, tu, headers, "") {
		ctx = withSameOriginRedirects(ctx)
	}

	root, err := os.OpenRoot(w.ws.Dir())
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("opening the workspace: %w", err)
	}
	defer root.Close()
	existed, err := downloadTarget(root, rel, c.Args.Bool("overwrite"))
	if err != nil {
		return toolkit.Result{}, err
	}
	dir := path.Dir(rel)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(dir, "."+path.Base(rel)+".download-"+hex.EncodeToString(suffix[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, downloadFileMode)
	if err != nil {
		return toolkit.Result{}, pathError(rel, err)
	}
	if err := w.ws.CheckOpened(tmp, f); err != nil {
		f.Close()
		root.Remove(tmp)
		return toolkit.Result{}, err
	}
	saved := false
	defer func() {
		if !saved {
			f.Close()
			root.Remove(tmp)
		}
	}()

	got, err := w.downloadInto(ctx, req, f, r)
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.Sync(); err != nil {
		return toolkit.Result{}, pathError(rel, err)
	}
	if err := f.Close(); err != nil {
		return toolkit.Result{}, pathError(rel, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		root.Remove(tmp)
		return toolkit.Result{}, pathError(rel, err)
	}
	saved = true
	verb := "Saved"
	if existed {
		verb = "Replaced"
	}
	content := fmt.Sprintf("%s %s (%s, %d bytes", verb, rel, toolkit.HumanSize(got.n), got.n)
	if got.mediaType != "" {
		content += ", " + got.mediaType
	}
	content += fmt.Sprintf(") from %s\nsha256: %s\n", got.finalURL, hex.EncodeToString(got.sum))
	return toolkit.Result{Content: content}, nil
}

// downloadPath is the workspace-relative path a download may write: a
// file, outside tooldispatch's data directory, writable.
func (w *Web) downloadPath(given string) (string, error) {
	rel, err := w.ws.Clean(given)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", errors.New("path is the workspace directory; name a file")
	}
	if rel == dataDir || strings.HasPrefix(rel, dataDir+"/") {
		return "", fmt.Errorf("path %q is inside tooldispatch's data directory; choose another place", given)
	}
	if err := w.ws.CheckWrite(rel); err != nil {
		return "", err
	}
	return rel, nil
}

// downloadTarget checks what is at rel in root (nothing, or a file that
// may be replaced when overwrite is set; existed reports the latter) and
// makes its directory.
func downloadTarget(root *os.Root, rel string, overwrite bool) (existed bool, err error) {
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return false, fmt.Errorf("path %q is a directory", rel)
		}
		if !overwrite {
			return false, fmt.Errorf("path %q already exists; pass overwrite true to replace it", rel)
		}
		existed = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, pathError(rel, err)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, downloadDirMode); err != nil {
			return false, pathError(dir, err)
		}
	}
	return existed, nil
}

// downloaded is what a download wrote.
type downloaded struct {
	n         int64
	sum       []byte // sha256
	mediaType string
	finalURL  string // after redirects, redacted
}

// downloadInto sends req and copies the response's body into f, within
// the download limit; a response status of 400 or more is an error with
// an excerpt of its body.
func (w *Web) downloadInto(ctx context.Context, req *http.Request, f io.Writer, r Redactor) (downloaded, error) {
	limit := w.cfg.DownloadMaxBytes
	var got downloaded
	var statusErr error
	err := w.do(ctx, req, w.cfg.DownloadTimeout, func(resp *http.Response) error {
		got.finalURL = resp.Request.URL.Redacted()
		if resp.StatusCode >= 400 {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes+1))
			er := &response{URL: resp.Request.URL, Status: resp.StatusCode, Header: resp.Header, Body: body}
			if len(body) > errorBodyBytes {
				er.Body, er.Truncated = body[:errorBodyBytes], true
			}
			statusErr = statusError(ctx, er, "reference a stored secret in a header (${secret:NAME}; the user stores one with store_secret)", excerptChars, r)
			return nil
		}
		if resp.ContentLength > limit {
			return &tooLargeError{limit: limit, what: fmt.Sprintf("the file (%s)", toolkit.HumanSize(resp.ContentLength))}
		}
		h := sha256.New()
		var err error
		got.n, err = io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return err
		}
		if got.n > limit {
			return &tooLargeError{limit: limit, what: "the file"}
		}
		got.sum = h.Sum(nil)
		got.mediaType = mediaType(resp.Header.Get("Content-Type"), nil)
		return nil
	})
	if err == nil {
		err = statusErr
	}
	return got, err
}

// pathError describes a failed workspace operation in plain words.
func pathError(rel string, err error) error {
	switch {
	case strings.Contains(err.Error(), "path escapes from parent"):
		return fmt.Errorf("path %q is outside the workspace", rel)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("path %q: permission denied", rel)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("path %q: a parent directory does not exist", rel)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("path %q: %v", rel, pe.Err)
	}
	return fmt.Errorf("path %q: %v", rel, err)
}
