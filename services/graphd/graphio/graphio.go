// Package graphio reads the graph files TinkerPop's io() step reads: GraphSON 3
// adjacency lists (one vertex per line, as GraphSONWriter.writeGraph writes
// them) and GraphML (as GraphMLReader reads it). It only parses: the caller
// adds the elements to its graph.
package graphio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Property is one vertex property: its id (nil when the file has none), its
// value and its meta-properties in file order.
type Property struct {
	ID    any
	Key   string
	Value any
	Meta  [][2]any
}

// Vertex is a vertex as the file gives it.
type Vertex struct {
	ID    any
	Label string
	Props []Property
}

// Edge is an edge as the file gives it; Props in file order.
type Edge struct {
	ID      any
	Label   string
	Out, In any
	Props   [][2]any
}

// Graph is what a file holds: vertices in file order, then edges.
type Graph struct {
	Vertices []Vertex
	Edges    []Edge
}

// Value decodes a GraphSON 3 value ({"@type","@value"} or a plain JSON value).
func Value(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var typed struct {
			Type  string          `json:"@type"`
			Value json.RawMessage `json:"@value"`
		}
		if err := json.Unmarshal(raw, &typed); err != nil {
			return nil, err
		}
		v := string(typed.Value)
		switch typed.Type {
		case "g:Int32":
			n, err := strconv.ParseInt(v, 10, 32)
			return int32(n), err
		case "g:Int64":
			return strconv.ParseInt(v, 10, 64)
		case "g:Double":
			return strconv.ParseFloat(v, 64)
		case "g:Float":
			f, err := strconv.ParseFloat(v, 32)
			return float32(f), err
		case "":
			return nil, fmt.Errorf("a JSON object where a GraphSON value was expected (maps are not read by graphd)")
		default:
			return nil, fmt.Errorf("GraphSON type %s is not read by graphd (g:Int32, g:Int64, g:Float, g:Double, strings and booleans are)", typed.Type)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string, bool, nil:
		return v, nil
	case json.Number:
		// An untyped number is what Jackson makes of it: an Integer, a
		// Long when it does not fit, a Double with a fraction or exponent.
		if n, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			if int64(int32(n)) == n {
				return int32(n), nil
			}
			return n, nil
		}
		return strconv.ParseFloat(x.String(), 64)
	}
	return nil, fmt.Errorf("an untyped JSON list or map %s (graphd reads GraphSON 3 property values of the types g:Int32, g:Int64, g:Float, g:Double, strings and booleans)", raw)
}

// Keys returns the keys of a JSON object in file order.
func Keys(raw json.RawMessage) ([]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var ks []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("expected a JSON object")
		}
		ks = append(ks, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return ks, nil
}

type gsVertex struct {
	ID         json.RawMessage `json:"id"`
	Label      string          `json:"label"`
	InE        json.RawMessage `json:"inE"`
	Properties json.RawMessage `json:"properties"`
}

type gsEdge struct {
	ID         json.RawMessage `json:"id"`
	OutV       json.RawMessage `json:"outV"`
	Properties json.RawMessage `json:"properties"`
}

type gsProp struct {
	ID         json.RawMessage `json:"id"`
	Value      json.RawMessage `json:"value"`
	Properties json.RawMessage `json:"properties"`
}

// ReadGraphSON reads a GraphSON 3 adjacency list. Edges are taken from their
// in vertex's inE, as TinkerPop's GraphSONReader.readGraph attaches them.
func ReadGraphSON(r io.Reader) (*Graph, error) {
	g := &Graph{}
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) > 0 {
			if perr := readLine(g, b); perr != nil {
				return nil, fmt.Errorf("line %d: %w", line, perr)
			}
		}
		if err == io.EOF {
			return g, nil
		}
	}
}

func readLine(g *Graph, b []byte) error {
	var v gsVertex
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	id, err := Value(v.ID)
	if err != nil {
		return err
	}
	if id == nil {
		return fmt.Errorf("a vertex without an id")
	}
	gv := Vertex{ID: id, Label: v.Label}
	if gv.Label == "" {
		gv.Label = "vertex"
	}
	pkeys, err := Keys(v.Properties)
	if err != nil {
		return err
	}
	var props map[string][]gsProp
	if len(pkeys) > 0 {
		if err := json.Unmarshal(v.Properties, &props); err != nil {
			return err
		}
	}
	for _, k := range pkeys {
		for _, p := range props[k] {
			val, err := Value(p.Value)
			if err != nil {
				return fmt.Errorf("property %s: %w", k, err)
			}
			gp := Property{Key: k, Value: val}
			if len(p.ID) > 0 {
				if gp.ID, err = Value(p.ID); err != nil {
					return err
				}
			}
			if gp.Meta, err = pairs(p.Properties); err != nil {
				return fmt.Errorf("property %s: %w", k, err)
			}
			gv.Props = append(gv.Props, gp)
		}
	}
	g.Vertices = append(g.Vertices, gv)
	labels, err := Keys(v.InE)
	if err != nil {
		return err
	}
	var inE map[string][]gsEdge
	if len(labels) > 0 {
		if err := json.Unmarshal(v.InE, &inE); err != nil {
			return err
		}
	}
	for _, label := range labels {
		for _, e := range inE[label] {
			ge := Edge{Label: label, In: id}
			if ge.ID, err = Value(e.ID); err != nil {
				return err
			}
			if ge.Out, err = Value(e.OutV); err != nil {
				return err
			}
			if ge.Props, err = pairs(e.Properties); err != nil {
				return fmt.Errorf("edge %v: %w", ge.ID, err)
			}
			g.Edges = append(g.Edges, ge)
		}
	}
	return nil
}

// pairs decodes a {key: value} object in file order.
func pairs(raw json.RawMessage) ([][2]any, error) {
	ks, err := Keys(raw)
	if err != nil || len(ks) == 0 {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make([][2]any, 0, len(ks))
	for _, k := range ks {
		v, err := Value(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, [2]any{k, v})
	}
	return out, nil
}

// GraphML's vertex and edge label keys (GraphMLReader's defaults).
const (
	labelV = "labelV"
	labelE = "labelE"
)

type gmlKey struct {
	ID   string `xml:"id,attr"`
	For  string `xml:"for,attr"`
	Name string `xml:"attr.name,attr"`
	Type string `xml:"attr.type,attr"`
}

type gmlData struct {
	Key   string `xml:"key,attr"`
	Value string `xml:",chardata"`
}

type gmlNode struct {
	ID   string    `xml:"id,attr"`
	Data []gmlData `xml:"data"`
}

type gmlEdge struct {
	ID     string    `xml:"id,attr"`
	Source string    `xml:"source,attr"`
	Target string    `xml:"target,attr"`
	Data   []gmlData `xml:"data"`
}

type gmlFile struct {
	Keys  []gmlKey `xml:"key"`
	Graph struct {
		Nodes []gmlNode `xml:"node"`
		Edges []gmlEdge `xml:"edge"`
	} `xml:"graph"`
}

// ReadGraphML reads GraphML as TinkerPop's GraphMLReader does: each key's
// attr.type (string, int, long, float, double, boolean; string when absent)
// types its data, the labelV/labelE data are the labels, ids are strings.
func ReadGraphML(r io.Reader) (*Graph, error) {
	var f gmlFile
	dec := xml.NewDecoder(r)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("GraphML: %w", err)
	}
	ks := map[string]gmlKey{}
	for _, k := range f.Keys {
		if k.Name == "" {
			k.Name = k.ID
		}
		ks[k.ID] = k
	}
	data := func(ds []gmlData, labelKey, def string) (string, [][2]any, error) {
		label := def
		var props [][2]any
		for _, d := range ds {
			k, ok := ks[d.Key]
			if !ok {
				k = gmlKey{ID: d.Key, Name: d.Key}
			}
			if d.Key == labelKey || k.Name == labelKey {
				label = d.Value
				continue
			}
			v, err := typed(d.Value, k.Type)
			if err != nil {
				return "", nil, fmt.Errorf("GraphML key %s: %w", k.Name, err)
			}
			props = append(props, [2]any{k.Name, v})
		}
		return label, props, nil
	}
	g := &Graph{}
	for _, n := range f.Graph.Nodes {
		label, props, err := data(n.Data, labelV, "vertex")
		if err != nil {
			return nil, err
		}
		v := Vertex{ID: n.ID, Label: label}
		for _, p := range props {
			v.Props = append(v.Props, Property{Key: p[0].(string), Value: p[1]})
		}
		g.Vertices = append(g.Vertices, v)
	}
	for _, e := range f.Graph.Edges {
		label, props, err := data(e.Data, labelE, "edge")
		if err != nil {
			return nil, err
		}
		ge := Edge{Label: label, Out: e.Source, In: e.Target, Props: props}
		if e.ID != "" {
			ge.ID = e.ID
		}
		g.Edges = append(g.Edges, ge)
	}
	return g, nil
}

func typed(s, typ string) (any, error) {
	switch strings.ToLower(typ) {
	case "", "string":
		return s, nil
	case "int":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		return int32(n), err
	case "long":
		return strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	case "float":
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
		return float32(f), err
	case "double":
		return strconv.ParseFloat(strings.TrimSpace(s), 64)
	case "boolean":
		return strconv.ParseBool(strings.TrimSpace(s))
	}
	return nil, fmt.Errorf("attr.type %q is not one of GraphML's (string, int, long, float, double, boolean)", typ)
}
