// Package yamldoc reads the YAML document of a config file, for the
// packages that parse it (config) and edit it (configedit).
package yamldoc

import (
	"bytes"
	"errors"
	"io"

	"gopkg.in/yaml.v3"
)

// First decodes the first YAML document of data. doc is nil, with a nil
// error, when data holds no document (nothing, or only comments); err is
// yaml.v3's own error for a document that is not valid YAML. dec reads on
// after the document, for a caller that refuses a second one.
func First(data []byte) (doc *yaml.Node, dec *yaml.Decoder, err error) {
	dec = yaml.NewDecoder(bytes.NewReader(data))
	var d yaml.Node
	if err := dec.Decode(&d); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, dec, nil
		}
		return nil, dec, err
	}
	return &d, dec, nil
}
