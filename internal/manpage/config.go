package manpage

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/profiles"
)

// configKey is one key of hadar.toml as the pages document it.
type configKey struct {
	config.KeyInfo
	// Table is "" for top-level keys, else the table ("slurm").
	Table string
	// Name is the key within its table ("bin_dir").
	Name string
	// Doc is the field's doc comment, made readable.
	Doc string
	// Default is the default value in TOML ("\"hadar\"", "\"6m\"", "false").
	Default string
}

// configTable is a table of hadar.toml and its doc comment.
type configTable struct {
	Name string
	Doc  string
}

// configDocs reads the doc comments of the Config struct (and the structs
// of its tables) from config/config.go's source and joins them with the
// keys and defaults of the compiled type. It fails when a key has no doc
// comment or when the source and config.Keys disagree.
func configDocs(src []byte) ([]configKey, []configTable, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "config.go", src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	structs := map[string]*ast.StructType{}
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
			}
		}
		return true
	})
	root := structs["Config"]
	if root == nil {
		return nil, nil, fmt.Errorf("no type Config in the source")
	}
	docs := map[string]string{}
	fieldKeys := map[string]string{} // Go field name -> key
	var tables []configTable
	var walk func(st *ast.StructType, prefix, fieldPrefix string) error
	walk = func(st *ast.StructType, prefix, fieldPrefix string) error {
		for _, fld := range st.Fields.List {
			if fld.Tag == nil || len(fld.Names) != 1 {
				continue
			}
			tag, err := strconv.Unquote(fld.Tag.Value)
			if err != nil {
				return err
			}
			name := strings.Split(reflect.StructTag(tag).Get("toml"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			goName := fld.Names[0].Name
			doc := cleanDoc(goName, fld.Doc.Text())
			fieldKeys[goName] = prefix + name
			if doc == "" {
				return fmt.Errorf("%s%s (%s%s) has no doc comment", fieldPrefix, goName, prefix, name)
			}
			if id, ok := fld.Type.(*ast.Ident); ok && id.Name != "Duration" && structs[id.Name] != nil {
				tables = append(tables, configTable{Name: prefix + name, Doc: doc})
				if err := walk(structs[id.Name], prefix+name+".", fieldPrefix+goName+"."); err != nil {
					return err
				}
				continue
			}
			docs[prefix+name] = doc
		}
		return nil
	}
	if err := walk(root, "", ""); err != nil {
		return nil, nil, err
	}
	// Go field names in the comments (SpoolDir) become keys (spool_dir).
	for goName, key := range fieldKeys {
		if len(regexp.MustCompile(`[A-Z]`).FindAllString(goName, -1)) < 2 || strings.ToUpper(goName) == goName {
			continue // Round, GRES: also plain words
		}
		re := regexp.MustCompile(`\b` + goName + `\b`)
		for k, d := range docs {
			docs[k] = re.ReplaceAllString(d, key)
		}
		for i := range tables {
			tables[i].Doc = re.ReplaceAllString(tables[i].Doc, key)
		}
	}
	def := config.Default()
	def.DataDir = profiles.SystemDir // the daemon runs as root
	var keys []configKey
	for _, k := range config.Keys() {
		doc, ok := docs[k.Key]
		if !ok {
			return nil, nil, fmt.Errorf("key %s of config.Keys is not in the source", k.Key)
		}
		delete(docs, k.Key)
		ck := configKey{KeyInfo: k, Doc: doc, Default: defaultOf(def, k)}
		if i := strings.LastIndexByte(k.Key, '.'); i >= 0 {
			ck.Table, ck.Name = k.Key[:i], k.Key[i+1:]
		} else {
			ck.Name = k.Key
		}
		keys = append(keys, ck)
	}
	for k := range docs {
		return nil, nil, fmt.Errorf("key %s of the source is not in config.Keys", k)
	}
	return keys, tables, nil
}

// defaultOf formats the value of key k in cfg as TOML.
func defaultOf(cfg config.Config, k config.KeyInfo) string {
	v := reflect.ValueOf(cfg)
	for _, f := range strings.Split(k.Field, ".") {
		v = v.FieldByName(f)
	}
	switch x := v.Interface().(type) {
	case config.Duration:
		return strconv.Quote(config.FormatDuration(x.Duration))
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case map[string]string:
		if len(x) == 0 {
			return "(empty)"
		}
	}
	return fmt.Sprint(v.Interface())
}

// docReplacements turn references to Go identifiers in the doc comments
// into what an administrator types.
var docReplacements = []struct{ from, to string }{
	{"a name from optimizer.Names()", "a name `hadar policies` lists"},
	{" (see profiles.Store.ResolveGPUType)", " (`hadar profiles alias`)"},
	{", see WriteProgress)", ", written by `hadar report`)"},
	{"the profiles database", "the throughput database"},
}

// cleanDoc joins a doc comment's lines into paragraphs and drops the
// field's name it starts with: "Round is the time ..." -> "The time ...".
func cleanDoc(goName, doc string) string {
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(doc), "\n\n") {
		paras = append(paras, strings.Join(strings.Fields(p), " "))
	}
	s := strings.Join(paras, "\n\n")
	switch {
	case strings.HasPrefix(s, goName+" is "):
		s = capitalize(strings.TrimPrefix(s, goName+" is "))
	case strings.HasPrefix(s, goName+" "):
		s = capitalize(strings.TrimPrefix(s, goName+" "))
	}
	for _, r := range docReplacements {
		s = strings.ReplaceAll(s, r.from, r.to)
	}
	return s
}
