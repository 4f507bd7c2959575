package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The SBOM is CycloneDX 1.5 JSON made from the Go build info the binary
// carries (what `go version -m` prints): the main module, each module linked
// in (after replacements) and the Go standard library, as golang package
// URLs, which vulnerability scanners match.

type bom struct {
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	SerialNumber string       `json:"serialNumber"`
	Version      int          `json:"version"`
	Metadata     bomMetadata  `json:"metadata"`
	Components   []component  `json:"components"`
	Dependencies []dependency `json:"dependencies"`
}

type bomMetadata struct {
	Timestamp string    `json:"timestamp"`
	Tools     bomTools  `json:"tools"`
	Component component `json:"component"`
}

type bomTools struct {
	Components []component `json:"components"`
}

type component struct {
	Type       string     `json:"type"`
	BOMRef     string     `json:"bom-ref,omitempty"`
	Name       string     `json:"name"`
	Version    string     `json:"version,omitempty"`
	PURL       string     `json:"purl,omitempty"`
	Properties []property `json:"properties,omitempty"`
}

type property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// SBOM describes the binary at path, built for platform as version at
// revision; created is its timestamp (SOURCE_DATE_EPOCH), so the same binary
// gives the same bytes.
func SBOM(path string, platform v1.Platform, version, revision string, created time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the Go build info of %s: %w", path, err)
	}
	return sbomOf(info, platform, version, revision, created)
}

func sbomOf(info *debug.BuildInfo, platform v1.Platform, version, revision string, created time.Time) ([]byte, error) {
	qualifiers := "?" + url.Values{"goos": {platform.OS}, "goarch": {platform.Architecture}, "type": {"module"}}.Encode()
	main := component{
		Type: "application", Name: "rainbow-manager", Version: version,
		PURL:       goPURL(info.Main.Path, version) + qualifiers,
		Properties: []property{{"revision", revision}, {"go.module", info.Main.Path}, {"go.package", info.Path}},
	}
	main.BOMRef = main.PURL
	for _, s := range info.Settings {
		main.Properties = append(main.Properties, property{"go.build." + s.Key, s.Value})
	}
	stdlib := component{Type: "library", Name: "stdlib", Version: info.GoVersion, PURL: goPURL("stdlib", info.GoVersion)}
	stdlib.BOMRef = stdlib.PURL
	comps := []component{stdlib}
	for _, m := range info.Deps {
		c := component{Type: "library"}
		if r := m.Replace; r != nil {
			c.Properties = append(c.Properties, property{"go.replaces", m.Path + "@" + m.Version})
			m = r
		}
		c.Name, c.Version, c.PURL = m.Path, m.Version, goPURL(m.Path, m.Version)
		c.BOMRef = c.PURL
		if m.Sum != "" {
			c.Properties = append(c.Properties, property{"go.sum", m.Sum})
		}
		comps = append(comps, c)
	}
	deps := dependency{Ref: main.BOMRef, DependsOn: []string{}}
	for _, c := range comps {
		deps.DependsOn = append(deps.DependsOn, c.BOMRef)
	}
	b := bom{
		BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		Metadata: bomMetadata{
			Timestamp: created.UTC().Format(time.RFC3339),
			Tools:     bomTools{Components: []component{{Type: "application", Name: "rainbow dev/image"}}},
			Component: main,
		},
		Components:   comps,
		Dependencies: []dependency{deps},
	}
	// A serial number that only the content decides.
	content, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	b.SerialNumber = "urn:uuid:" + contentUUID(content)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // the purls' "&" as is
	enc.SetIndent("", "  ")
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// goPURL is the package URL of a Go module (or "stdlib") at version.
func goPURL(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "pkg:golang/" + strings.Join(segs, "/") + "@" + url.PathEscape(version)
}

// contentUUID is an RFC 9562 UUID (version 8, custom) from data's SHA-256.
func contentUUID(data []byte) string {
	h := sha256.Sum256(data)
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// writeSBOMs writes one SBOM per binary into dir, named after name and the
// platform.
func writeSBOMs(dir, name string, binaries []string, platforms []v1.Platform, version, revision string, created time.Time) error {
	for i, p := range platforms {
		data, err := SBOM(binaries[i], p, version, revision, created)
		if err != nil {
			return err
		}
		file := fmt.Sprintf("%s/%s-%s-%s-%s.cdx.json", dir, name, version, p.OS, p.Architecture)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
