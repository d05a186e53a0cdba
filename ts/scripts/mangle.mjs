// Computes the property names a minified bundle of the runtime may rename
// (esbuild's MangleProps): every property name declared or used in src/
// that is not part of the public API (the emitted declarations, without
// private and @internal members), not a name of the JavaScript, DOM or Node
// libraries, and not a string literal (which could index an object). The
// list is written to mangle.json; `node scripts/mangle.mjs --check` fails
// if it is stale. tsnode and the bench read it (bundle_bytes).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(dir, "src");
const files = fs.readdirSync(src).filter((f) => f.endsWith(".ts")).map((f) => path.join(src, f));
const words = (text, into) => {
  for (const w of text.match(/[A-Za-z_$][\w$]*/g) ?? []) into.add(w);
};

// The public API: the declarations tsc emits, without comments, private
// members and @internal members.
const reserved = new Set();
const program = ts.createProgram(files, {
  target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ["lib.es2022.d.ts", "lib.dom.d.ts"], types: [], strict: true, declaration: true, emitDeclarationOnly: true,
  removeComments: true, stripInternal: true, skipLibCheck: true, verbatimModuleSyntax: true, isolatedModules: true,
});
const emitted = program.emit(undefined, (name, text) => {
  words(text.split("\n").filter((l) => !/^\s*private\b/.test(l)).join("\n"), reserved);
});
if (emitted.emitSkipped) throw new Error("declaration emit failed");

// Code bundled with the runtime that is not part of it keeps its names.
for (const f of [path.join(dir, "..", "internal", "tsnode", "driver.ts"), path.join(dir, "web", "app.ts")]) {
  if (fs.existsSync(f)) words(fs.readFileSync(f, "utf8"), reserved);
}
const checker = program.getTypeChecker();
const ours = (decls) => decls !== undefined && decls.length > 0 && decls.every((d) => files.includes(path.normalize(d.getSourceFile().fileName)));

// Property names in the sources; string literals that are identifiers are reserved.
const candidates = new Set();
for (const sf of program.getSourceFiles()) {
  if (!files.includes(path.normalize(sf.fileName))) continue;
  const visit = (n) => {
    if ((ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) && /^[A-Za-z_$][\w$]*$/.test(n.text)) reserved.add(n.text);
    if (ts.isPropertyAccessExpression(n) && ts.isIdentifier(n.name)) {
      // A property of a library's object (or of an untyped one) keeps its name.
      const sym = checker.getSymbolAtLocation(n.name);
      if (ours(sym?.declarations)) candidates.add(n.name.text);
      else reserved.add(n.name.text);
    }
    if (ts.isObjectLiteralExpression(n)) {
      // An object literal given to a library keeps the names the library reads.
      const c0 = checker.getContextualType(n);
      const ctx = c0 && checker.getNonNullableType(c0);
      for (const p of n.properties) {
        if (!p.name || !ts.isIdentifier(p.name)) continue;
        const want = ctx?.getProperty(p.name.text);
        if (ctx && (!want || ours(want.declarations))) continue;
        if (ctx === undefined) continue;
        reserved.add(p.name.text);
      }
    }
    if ((ts.isPropertyDeclaration(n) || ts.isMethodDeclaration(n) || ts.isPropertyAssignment(n) || ts.isPropertySignature(n) ||
      ts.isMethodSignature(n) || ts.isGetAccessor(n) || ts.isSetAccessor(n)) && n.name && ts.isIdentifier(n.name)) candidates.add(n.name.text);
    if (ts.isShorthandPropertyAssignment(n)) candidates.add(n.name.text);
    if (ts.isBindingElement(n) && n.propertyName && ts.isIdentifier(n.propertyName)) candidates.add(n.propertyName.text);
    if (ts.isBindingElement(n) && !n.propertyName && ts.isIdentifier(n.name) && ts.isObjectBindingPattern(n.parent)) candidates.add(n.name.text);
    if (ts.isParameter(n) && ts.isIdentifier(n.name) && n.modifiers?.some((m) => m.kind !== ts.SyntaxKind.Decorator)) candidates.add(n.name.text);
    ts.forEachChild(n, visit);
  };
  visit(sf);
}
const props = [...candidates].filter((p) => !reserved.has(p)).sort();
const out = JSON.stringify({ props }, null, 1) + "\n";
const file = path.join(dir, "mangle.json");
if (process.argv.includes("--check")) {
  if (fs.readFileSync(file, "utf8") !== out) {
    console.error("ts/mangle.json is stale: run node scripts/mangle.mjs");
    process.exit(1);
  }
} else {
  fs.writeFileSync(file, out);
  console.log(`${props.length} internal property names`);
}
