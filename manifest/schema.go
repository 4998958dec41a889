package manifest

import (
	"encoding/json"
	"strings"
)

// SchemaID is the $id of the JSON Schema of sandbox.toml.
const SchemaID = "https://airlock.dev/schema/sandbox.schema.json"

type schemaNode struct {
	Schema      string                 `json:"$schema,omitempty"`
	ID          string                 `json:"$id,omitempty"`
	Title       string                 `json:"title,omitempty"`
	Description string                 `json:"description,omitempty"`
	Type        string                 `json:"type,omitempty"`
	Enum        []string               `json:"enum,omitempty"`
	Pattern     string                 `json:"pattern,omitempty"`
	Minimum     *float64               `json:"minimum,omitempty"`
	Maximum     *float64               `json:"maximum,omitempty"`
	MaxLength   int                    `json:"maxLength,omitempty"`
	Default     json.RawMessage        `json:"default,omitempty"`
	Items       *schemaNode            `json:"items,omitempty"`
	AnyOf       []*schemaNode          `json:"anyOf,omitempty"`
	Const       any                    `json:"const,omitempty"`
	Properties  map[string]*schemaNode `json:"properties,omitempty"`
	// AdditionalProperties is false for fixed tables, a schema for named entries.
	AdditionalProperties any         `json:"additionalProperties,omitempty"`
	PropertyNames        *schemaNode `json:"propertyNames,omitempty"`
}

const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// Schema returns the JSON Schema (draft 2020-12) of sandbox.toml, for editors.
func Schema() []byte {
	root := &schemaNode{
		Schema:      "https://json-schema.org/draft/2020-12/schema",
		ID:          SchemaID,
		Title:       "airlock sandbox.toml",
		Description: "The manifest of an airlock sandbox (sandbox.toml, sandbox.local.toml and presets).",
		Type:        "object",
		Properties:  map[string]*schemaNode{},

		AdditionalProperties: false,
	}
	for _, f := range Fields {
		parent := root
		parts := strings.Split(f.Key, ".")
		for _, p := range parts[:len(parts)-1] {
			parent = child(parent, p)
		}
		n := child(parent, parts[len(parts)-1])
		fill(n, f)
	}
	b, _ := json.MarshalIndent(root, "", "  ")
	return append(b, '\n')
}

// child returns the node for key under parent; "<name>" is any entry name.
func child(parent *schemaNode, key string) *schemaNode {
	if key == "<name>" {
		parent.Type = "object"
		if n, ok := parent.AdditionalProperties.(*schemaNode); ok {
			return n
		}
		n := &schemaNode{Type: "object", Properties: map[string]*schemaNode{}, AdditionalProperties: false}
		parent.AdditionalProperties = n
		parent.PropertyNames = &schemaNode{Pattern: entryNameRE.String(), MaxLength: MaxNameLength}
		return n
	}
	if parent.Properties == nil {
		parent.Properties = map[string]*schemaNode{}
		if parent.AdditionalProperties == nil {
			parent.AdditionalProperties = false
		}
	}
	n, ok := parent.Properties[key]
	if !ok {
		n = &schemaNode{}
		parent.Properties[key] = n
	}
	return n
}

func fill(n *schemaNode, f Field) {
	n.Description = f.Doc
	n.Enum = f.Enum
	n.Minimum, n.Maximum = f.Min, f.Max
	switch f.Type {
	case "string":
		n.Type = "string"
	case "duration":
		n.Type, n.Pattern = "string", durationPattern
	case "boolean":
		n.Type = "boolean"
	case "integer":
		n.Type = "integer"
	case "number":
		n.Type = "number"
	case "array of strings":
		n.Type = "array"
		n.Items = &schemaNode{Type: "string", Enum: f.Enum}
		n.Enum = nil
	case "table of strings":
		n.Type = "object"
		n.AdditionalProperties = &schemaNode{Type: "string"}
		if f.Removable {
			// false: a removal of the variable a lower layer set.
			n.AdditionalProperties = &schemaNode{AnyOf: []*schemaNode{{Type: "string"}, {Const: false}}}
		}
		if f.Names != "" {
			n.PropertyNames = &schemaNode{Pattern: f.Names}
		}
	case "table":
		n.Type = "object" // its keys are the fields below it
	}
	if f.Default != "" && json.Valid([]byte(f.Default)) {
		n.Default = json.RawMessage(f.Default)
	}
}
