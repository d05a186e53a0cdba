package gen

import (
	"fmt"
	"strings"

	"github.com/replicago/replica/schema"
)

// Typed RPC functions. For an RPC fire that the client calls on class
// Player, the generated file declares
//
//	func (p PlayerView) Fire(c *client.Conn, <args>) error
//	func HandlePlayerFire(s *replica.Server, fn func(c *replica.Conn, p Player, <args>) error)
//
// and for an RPC hit that the server sends
//
//	func SendPlayerHit(s *replica.Server, to replica.RPCTarget, p Player, <args>) error
//	func OnPlayerHit(c *client.Conn, fn func(p PlayerView, <args>)) (cancel func())
//
// The client's side takes and passes the class's view, the server's side
// the class itself.
// where <args> are the arguments one by one (RPC.Positional) or args Fire,
// the argument struct.

// rpcMethod returns the name of the method on the class's view that calls
// r, or "" when r is sent by the server.
func rpcMethod(r *RPC) string {
	if r.Dir == schema.ClientToServer {
		return r.Method
	}
	return ""
}

// rpcFuncNames returns the package-level functions generated for r.
func rpcFuncNames(r *RPC) []string {
	c := r.Class.Name
	if r.Dir == schema.ClientToServer {
		return []string{"Handle" + c + r.Method}
	}
	return []string{"Send" + c + r.Method, "On" + c + r.Method}
}

// addRPCNames adds the names of the RPC functions to names, the generated
// names of p, as names of the argument structs.
func (p *Package) addRPCNames(names map[string]*Struct) {
	for _, c := range p.Classes {
		for _, r := range c.RPCs {
			for _, n := range rpcFuncNames(r) {
				names[n] = r.Args
			}
		}
	}
}

// rpcClashes reports RPC functions and methods whose names replicagen also
// generates for something else, or that user methods already take.
func (p *Package) rpcClashes() ErrorList {
	var errs ErrorList
	// Every other top-level name, with what it is generated for.
	others := map[string]string{}
	for _, s := range p.Structs {
		others[s.Name] = "the type " + s.Name + " for " + s.Spec
	}
	for _, d := range p.structDecls() {
		others[d.name] = "the " + d.kind() + " " + d.name + " for " + d.what()
	}
	for _, c := range p.Classes {
		for _, cb := range callbackFuncs(c) {
			others[cb.name] = "the function " + cb.name + " for " + cb.what()
		}
	}
	for _, c := range p.Classes {
		for _, r := range c.RPCs {
			for _, n := range rpcFuncNames(r) {
				if what, dup := others[n]; dup {
					errs = append(errs, &Error{Pos: r.Pos, Msg: fmt.Sprintf(
						"replicagen generates the function %s for RPC %s of %s and %s; rename one of them", n, r.Name, c.Spec, what)})
					continue
				}
				others[n] = "the function " + n + " for RPC " + r.Name + " of " + c.Spec
			}
		}
	}

	// Methods on the class's view. An RPC may not take the name of a
	// field's getter or setter either where the view has none (a setter,
	// the getter of a server-only field): the method would read as the
	// accessor.
	for _, c := range p.Classes {
		v := viewName(c)
		methods := map[string]string{"ID": "", "Entity": "", "IsOwned": "", "Valid": ""}
		for _, f := range c.Fields {
			if !f.Schema.Deprecated {
				methods[f.Method] = "field " + f.Name
				methods["Set"+f.Method] = "field " + f.Name
			}
		}
		for _, r := range c.RPCs {
			m := rpcMethod(r)
			if m == "" {
				continue
			}
			if what, dup := methods[m]; dup {
				msg := fmt.Sprintf("RPC %s would generate the method %s.%s, which replicagen also generates for every class view", r.Name, v, m)
				if what != "" {
					msg = fmt.Sprintf("RPC %s would generate the method %s.%s, named like an accessor replicagen generates for %s", r.Name, v, m, what)
				}
				errs = append(errs, &Error{Pos: r.Pos, Msg: msg + "; rename the RPC's struct"})
				continue
			}
			methods[m] = "RPC " + r.Name
			if pos, ok := c.ViewMethods[m]; ok {
				errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf(
					"method %s.%s clashes with the method replicagen generates to call RPC %s of %s; rename the method", v, m, r.Name, c.Spec)})
			}
		}
	}
	return errs
}

// rpcParam is an argument as a parameter of the generated functions.
type rpcParam struct {
	name string // parameter name
	f    *Field
}

// rpcReserved are identifiers that the bodies of the generated RPC
// functions use, or that name their other parameters; arguments with these
// names are renamed.
var rpcReserved = map[string]bool{
	"a": true, "c": true, "p": true, "s": true, "e": true, "to": true, "fn": true, "args": true,
	"math": true, "state": true, "client": true, "replica": true, "schema": true, "iter": true,
	"bool": true, "byte": true, "string": true, "int64": true, "uint32": true, "uint64": true,
	"float32": true, "float64": true, "true": true, "false": true, "nil": true, "error": true,
}

// rpcParams returns the parameters of a positional RPC, named after the
// arguments; a name the generated code needs gets the suffix Arg.
func rpcParams(r *RPC) []rpcParam {
	fields := r.Params()
	taken := map[string]bool{}
	for _, f := range fields {
		taken[f.Name] = true
	}
	out := make([]rpcParam, len(fields))
	for i, f := range fields {
		n := f.Name
		if rpcReserved[n] || strings.HasPrefix(n, "replica") {
			n += "Arg"
			for taken[n] {
				n += "_"
			}
			taken[n] = true
		}
		out[i] = rpcParam{n, f}
	}
	return out
}

// paramList renders params as a Go parameter list, grouping neighbours of
// the same type: "x, y float32, weapon uint8".
func paramList(params []rpcParam) string {
	var b strings.Builder
	for i, q := range params {
		b.WriteString(q.name)
		if i+1 < len(params) && params[i+1].f.GoType == q.f.GoType {
			b.WriteString(", ")
			continue
		}
		b.WriteString(" " + q.f.GoType)
		if i+1 < len(params) {
			b.WriteString(", ")
		}
	}
	return b.String()
}

// rpcs emits the RPC functions of class c.
func (e *emitter) rpcs(c *Struct) {
	for _, r := range c.RPCs {
		e.imports["replica"] = true
		var params []rpcParam
		sig := "args " + r.Method // parameters for the arguments
		if r.Positional() {
			params = rpcParams(r)
			sig = paramList(params)
		}
		withArgs := func(head string) string {
			if sig == "" {
				return head
			}
			return head + ", " + sig
		}
		id := r.Schema.ID
		v := viewName(c)
		if r.Dir == schema.ClientToServer {
			handler := "Handle" + c.Name + r.Method
			e.comment(fmt.Sprintf("%s calls the RPC %s on p: c sends it to the server, which runs the function registered with %s at its next tick. The server accepts it only from the client that owns p. Call it from the goroutine that polls c.",
				r.Method, r.Name, handler))
			e.f("func (p %s) %s(%s) error {\n", v, r.Method, withArgs("c *client.Conn"))
			e.f("\treturn c.CallRPC(p.e, %d, %s)\n}\n\n", id, e.buildArgs(r, params))
			e.comment(fmt.Sprintf("%s registers fn to handle the RPC %s, which the client that owns %s %s calls with %s.%s. s runs fn on the tick goroutine, only for calls from the owner; an error from fn refuses the call, as for a replica.RPCHandler.",
				handler, r.Name, strings.ToLower(article(c.Name)), c.Name, v, r.Method))
			e.f("func %s(s *replica.Server, fn func(%s) error) {\n", handler, withArgs("c *replica.Conn, p "+c.Name))
			e.f("\ts.HandleRPC(%s, %d, func(c *replica.Conn, e *state.Entity, a *state.Record) error {\n", schemaVar(c), id)
			e.f("\t\treturn fn(%s)\n\t})\n}\n\n", strings.Join(append([]string{"c", c.Name + "{e}"}, e.readArgs(r, params)...), ", "))
			continue
		}
		send, on := "Send"+c.Name+r.Method, "On"+c.Name+r.Method
		e.comment(fmt.Sprintf("%s sends the RPC %s on p to the clients that to selects (replica.ToOwner, replica.ToObservers or replica.ToConn), which run the functions registered with %s after applying the state of the current tick. Call it on the tick goroutine.",
			send, r.Name, on))
		e.f("func %s(%s) error {\n", send, withArgs("s *replica.Server, to replica.RPCTarget, p "+c.Name))
		e.f("\treturn s.SendRPC(to, p.e, %d, %s)\n}\n\n", id, e.buildArgs(r, params))
		e.comment(fmt.Sprintf("%s registers fn to run, on the goroutine that polls c, when the server sends the RPC %s on %s %s to c, and returns a func that unregisters it.",
			on, r.Name, strings.ToLower(article(c.Name)), c.Name))
		e.f("func %s(c *client.Conn, fn func(%s)) (cancel func()) {\n", on, withArgs("p "+v))
		e.f("\treturn c.HandleRPC(%s, %d, func(e *state.Entity, a *state.Record) {\n", schemaVar(c), id)
		e.f("\t\tfn(%s)\n\t})\n}\n\n", strings.Join(append([]string{v + "{e}"}, e.readArgs(r, params)...), ", "))
	}
}

// buildArgs emits the statements that store the arguments of a call in a
// new record, and returns the expression of the record.
func (e *emitter) buildArgs(r *RPC, params []rpcParam) string {
	if !r.Positional() {
		// A zero args is all zero arguments.
		e.f("\tif !args.Valid() {\n\t\targs = New%s()\n\t}\n", r.Method)
		return "args.h.Record()"
	}
	e.f("\ta := state.NewValue(%s)\n", schemaVar(r.Args))
	for _, q := range params {
		sf := q.f.Schema
		if sf.Type.Kind.Numeric() {
			e.f("\ta.SetNum(%d, %s)\n", sf.Leaf, e.plain(&sf.Type, q.name))
		} else {
			e.f("\ta.SetStr(%d, string(%s))\n", sf.Leaf, q.name)
		}
	}
	return "a.Record()"
}

// readArgs returns the expressions that read the arguments from record a:
// one per parameter, or the argument struct, a copy the callee may keep.
func (e *emitter) readArgs(r *RPC, params []rpcParam) []string {
	if !r.Positional() {
		return []string{r.Method + "{state.ValueOf(a)}"}
	}
	var out []string
	for _, q := range params {
		f, sf := q.f, q.f.Schema
		if sf.Type.Kind.Numeric() {
			out = append(out, e.fromNum(&sf.Type, f.GoType, quantVar(r.Args, f), fmt.Sprintf("a.Num(%d)", sf.Num)))
		} else {
			out = append(out, fmt.Sprintf("%s(a.Str(%d))", f.GoType, sf.Obj))
		}
	}
	return out
}

// rpcDoc returns the paragraph that the doc comment of an argument struct
// ends with.
func rpcDoc(r *RPC) string {
	c, m := r.Class.Name, r.Method
	var how string
	if r.Dir == schema.ClientToServer {
		how = fmt.Sprintf("which the client that owns %s %s calls with %sView.%s and the server handles with Handle%s%s", strings.ToLower(article(c)), c, c, m, c, m)
	} else {
		how = fmt.Sprintf("which the server sends with Send%s%s and clients receive with On%s%s", c, m, c, m)
	}
	if r.Positional() {
		return fmt.Sprintf("%s holds the arguments of the RPC %s of %s, %s; both take the arguments one by one. %s %s is a detached value made by New%s.",
			m, r.Name, c, how, article(m), m, m)
	}
	return fmt.Sprintf("%s holds the arguments of the RPC %s of %s, %s; both take %s %s. %s %s is a detached value: make one with New%s and set its fields.",
		m, r.Name, c, how, strings.ToLower(article(m)), m, article(m), m, m)
}
