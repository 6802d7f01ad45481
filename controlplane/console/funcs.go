package console

import "html/template"

// funcs are the templates' helpers (none builds HTML: html/template
// escapes everything they return).
var funcs = template.FuncMap{}
