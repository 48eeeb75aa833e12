package web

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit/internal/hostform"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// Defaults of the download tool.
const (
	DefaultDownloadMaxBytes = 100 << 20
	DefaultDownloadTimeout  = 5 * time.Minute
)

// Config is the operator's configuration of the web tools, as it appears in
// the configuration file (TOML). The zero value is valid: public addresses
// only, no search backend, no APIs.
type Config struct {
	// SearchURL is the base URL of a SearXNG instance (or anything that
	// answers SearXNG's /search?format=json); "/search" is appended unless
	// the path already ends with it. The instance must have the json format
	// enabled (search.formats in settings.yml). Empty: search_web is not
	// registered unless Deps.Search supplies a backend. The search backend
	// is trusted: it may be on a loopback or private address.
	SearchURL string `toml:"search_url"`
	// AllowLoopback lets the tools reach loopback addresses and localhost.
	AllowLoopback bool `toml:"allow_loopback"`
	// AllowPrivate lets the tools reach private addresses (Policy.AllowPrivate).
	AllowPrivate bool `toml:"allow_private"`
	// Timeout bounds one request (default 30s).
	Timeout time.Duration `toml:"timeout"`
	// MaxBytes caps the bytes read from one response (default 5 MiB).
	MaxBytes int64 `toml:"max_bytes"`
	// MaxRedirects is how many redirects a request follows (default 5;
	// -1 follows none).
	MaxRedirects int `toml:"max_redirects"`
	// DownloadMaxBytes caps the size of a file download_file saves
	// (default 100 MiB).
	DownloadMaxBytes int64 `toml:"download_max_bytes"`
	// DownloadTimeout bounds one download (default 5m).
	DownloadTimeout time.Duration `toml:"download_timeout"`
	// UserAgent is sent with requests that set none.
	UserAgent string `toml:"user_agent"`
	// APIs are the public APIs public_api_list shows the model, for use
	// with http_request.
	APIs []API `toml:"apis"`
}

// API is one entry of public_api_list.
type API struct {
	Name        string `toml:"name"`
	BaseURL     string `toml:"base_url"`
	Description string `toml:"description"`
	DocsURL     string `toml:"docs_url"`
	// AuthHeader, when the API needs a credential, is the header that
	// carries it, e.g. "Authorization" or "X-Api-Key".
	AuthHeader string `toml:"auth_header"`
	// AuthValue is the header's value with a secret reference, e.g.
	// "Bearer ${secret:GITHUB_TOKEN}". Default: ${secret:NAME} with NAME
	// made from the API's name (upper case, '_' for other characters,
	// suffix _KEY).
	AuthValue string `toml:"auth_value"`
	// Origins are origins, besides base_url's, that the API's secret may
	// be sent to (e.g. an upload host). The secret of AuthValue is bound to
	// base_url's origin and to these (see secrets.Store.Bind).
	Origins []string `toml:"origins"`
}

// secretOrigins returns the origins the API binds its secrets to:
// base_url's and Origins, normalised.
func (a API) secretOrigins() ([]string, error) {
	u, err := url.Parse(a.BaseURL)
	if err != nil {
		return nil, err
	}
	base, err := secrets.OriginOf(u)
	if err != nil {
		return nil, err
	}
	extra, err := secrets.ParseOrigins(a.Origins)
	if err != nil {
		return nil, err
	}
	return append([]string{base}, extra...), nil
}

// secretNames returns the names of the secrets the API's auth header
// references (none without an auth header).
func (a API) secretNames() []string {
	if a.AuthHeader == "" {
		return nil
	}
	value := a.AuthValue
	if value == "" {
		value = secrets.Reference(defaultSecretName(a.Name))
	}
	return secrets.References(value)
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("web: timeout must not be negative, got %v", c.Timeout)
	case c.MaxBytes < 0:
		return fmt.Errorf("web: max_bytes must not be negative, got %d", c.MaxBytes)
	case c.MaxRedirects < -1:
		return fmt.Errorf("web: max_redirects must be -1 or more, got %d", c.MaxRedirects)
	case c.DownloadMaxBytes < 0:
		return fmt.Errorf("web: download_max_bytes must not be negative, got %d", c.DownloadMaxBytes)
	case c.DownloadTimeout < 0:
		return fmt.Errorf("web: download_timeout must not be negative, got %v", c.DownloadTimeout)
	}
	if c.SearchURL != "" {
		if _, err := searchEndpoint(c.SearchURL); err != nil {
			return fmt.Errorf("web: search_url: %w", err)
		}
	}
	seen := map[string]bool{}
	for i, a := range c.APIs {
		name := strings.TrimSpace(a.Name)
		if name == "" {
			return fmt.Errorf("web: apis[%d].name is empty", i)
		}
		if seen[strings.ToLower(name)] {
			return fmt.Errorf("web: apis[%d].name %q is listed twice", i, name)
		}
		seen[strings.ToLower(name)] = true
		u, err := url.Parse(a.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("web: apis[%d].base_url %q is not an http(s) URL", i, a.BaseURL)
		}
		if a.DocsURL != "" {
			if u, err := url.Parse(a.DocsURL); err != nil || u.Host == "" {
				return fmt.Errorf("web: apis[%d].docs_url %q is not a URL", i, a.DocsURL)
			}
		}
		if a.AuthValue != "" && a.AuthHeader == "" {
			return fmt.Errorf("web: apis[%d].auth_value needs auth_header", i)
		}
		if _, err := a.secretOrigins(); err != nil {
			return fmt.Errorf("web: apis[%d].origins: %w", i, err)
		}
		if len(a.Origins) > 0 && a.AuthHeader == "" {
			return fmt.Errorf("web: apis[%d].origins binds the API's secret, so it needs auth_header", i)
		}
	}
	return nil
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	switch c.MaxRedirects {
	case 0:
		c.MaxRedirects = DefaultMaxRedirects
	case -1:
		c.MaxRedirects = 0
	}
	if c.DownloadMaxBytes == 0 {
		c.DownloadMaxBytes = DefaultDownloadMaxBytes
	}
	if c.DownloadTimeout == 0 {
		c.DownloadTimeout = DefaultDownloadTimeout
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	return c
}

// Policy returns the outbound policy the configuration describes, defaults
// filled in.
func (c Config) Policy() Policy {
	d := c.withDefaults()
	p := DefaultPolicy()
	p.Timeout = d.Timeout
	p.MaxBytes = d.MaxBytes
	p.MaxRedirects = d.MaxRedirects
	p.AllowLoopback = d.AllowLoopback
	p.AllowPrivate = d.AllowPrivate
	p.UserAgent = d.UserAgent
	return p
}

// searchEndpoint turns a search_url into the URL of the search endpoint.
func searchEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, errors.New("not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if !strings.HasSuffix(u.Path, "/search") {
		u = u.JoinPath("search")
	}
	u.RawQuery, u.Fragment = "", ""
	return hostform.URL(u)
}
