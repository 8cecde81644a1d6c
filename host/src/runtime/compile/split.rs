//! Splitting a component's large libraries out as imports: the component
//! keeps its own modules and imports each library module (one with much
//! code that imports its memory) by content (`agenthost-shared-m<sha-256>`),
//! so what many builds share (a Python agent's interpreter, its libc) is
//! compiled once (`runtime::compile::shared_modules`) and a redeploy compiles only
//! what changed.
//!
//! A module marked as code every build shares (`runtime::compile::split_state`) is
//! split in two: its state stays inside as a small module, its code becomes
//! an import like a library's, instantiated with the state's instance.
//!
//! The rewrite keeps every index space but for that one split: an imported
//! core module takes the index of the module it replaces, and its type goes
//! into a new core type section, which is why components that define core
//! types of their own are left whole. A state split adds one module and one
//! instance; the references after them are shifted (`Shift`), and a
//! component that nests one aliasing an outer core module after it is left
//! whole. Nested components are otherwise copied as they are.

use std::borrow::Cow;
use std::ops::Range;

use sha2::{Digest, Sha256};
use wasm_encoder::reencode::{Reencode, ReencodeComponent, RoundtripReencoder};
use wasm_encoder::{
    ComponentCoreTypeEncoder, ComponentImportSection, ComponentTypeRef, CoreTypeSection,
    EntityType, ModuleArg, ModuleType, RawSection,
};
use wasmparser::{
    ComponentAlias, ComponentExternalKind, ComponentOuterAliasKind, ExternalKind, Parser, Payload,
    TypeRef,
};

use super::split_state::{self, STATE_MODULE};

/// Shared modules have at least this much code; smaller ones compile in
/// milliseconds and stay inside their component.
pub(crate) const MIN_SHARED_CODE_BYTES: u32 = 64 * 1024;

/// The prefix of a shared module's import name; its SHA-256 follows.
const IMPORT_PREFIX: &str = "agenthost-shared-m";

/// A component with its large core modules turned into imports.
pub(crate) struct Split<'a> {
    /// The rewritten component, to compile.
    pub component: Vec<u8>,
    /// The modules it imports, to compile (or find) by their hash.
    pub modules: Vec<SharedModule<'a>>,
}

/// One large core module of a component.
pub(crate) struct SharedModule<'a> {
    /// Its SHA-256, hex: what it is compiled and stored under.
    pub sha256: String,
    /// The module as it is in the component, or the code half of a state split.
    pub bytes: Cow<'a, [u8]>,
}

/// The import name under which a component imports the module `sha256`.
pub(crate) fn import_name(sha256: &str) -> String {
    format!("{IMPORT_PREFIX}{sha256}")
}

/// The hash in a shared module's import name, if `name` is one.
pub(crate) fn shared_sha256(name: &str) -> Option<&str> {
    name.strip_prefix(IMPORT_PREFIX)
        .filter(|sha| sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Splits `component`, or returns `None` when it has no module to share or a
/// shape this rewrite leaves alone. An error means the bytes do not parse:
/// the compile that follows reports it in its own words.
pub(crate) fn split(component: &[u8]) -> Result<Option<Split<'_>>, wasmparser::BinaryReaderError> {
    let mut out = wasm_encoder::Component::new();
    let mut modules: Vec<SharedModule<'_>> = Vec::new();
    let mut depth = 0usize;
    // The core modules and core instances of the original, counted as they
    // are defined, and what a state split shifts.
    let (mut module_count, mut instance_count) = (0u32, 0u32);
    let mut shift = Shift::default();
    for payload in Parser::new(0).parse_all(component) {
        let payload = payload?;
        if depth > 0 {
            match payload {
                Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
                Payload::End(_) => depth -= 1,
                _ => {}
            }
            continue;
        }
        match &payload {
            Payload::Version { encoding, .. } => {
                if *encoding != wasmparser::Encoding::Component {
                    return Ok(None);
                }
            }
            Payload::CoreTypeSection(_) => return Ok(None),
            Payload::ModuleSection {
                unchecked_range, ..
            } => {
                depth += 1;
                let bytes = slice(component, unchecked_range);
                let index = module_count;
                module_count += 1;
                // Shared: the libraries of a dynamically linked program (they
                // import their memory). A module that defines its memory holds
                // the program's own data (a Python agent's snapshot, a Rust
                // agent whole) and is different in every build, unless it is
                // marked as code every build shares: then its state stays.
                let found = module_type(bytes).filter(|f| f.code >= MIN_SHARED_CODE_BYTES);
                let code = match found {
                    Some(found) if !found.defines_memory => Some((found.ty, Cow::Borrowed(bytes))),
                    Some(_) if shift.module.is_none() => {
                        split_state::split(bytes).and_then(|halves| {
                            let ty = module_type(&halves.code)?.ty;
                            out.section(&RawSection {
                                id: wasm_encoder::ComponentSectionId::CoreModule as u8,
                                data: &halves.state,
                            });
                            shift.module = Some(index);
                            Some((ty, Cow::Owned(halves.code)))
                        })
                    }
                    _ => None,
                };
                let shared = code.map(|(ty, code)| {
                    let sha256 = hex::encode(Sha256::digest(&code));
                    (ty, sha256, code)
                });
                // A module twice in one component would import one name twice.
                match shared.filter(|(_, sha, _)| !modules.iter().any(|m| &m.sha256 == sha)) {
                    Some((ty, sha256, bytes)) => {
                        // The type, then the import: the module keeps its index.
                        let mut types = CoreTypeSection::new();
                        ComponentCoreTypeEncoder::module(types.ty(), &ty);
                        out.section(&types);
                        let mut imports = ComponentImportSection::new();
                        let type_index = u32::try_from(modules.len()).unwrap_or(u32::MAX);
                        imports.import(
                            import_name(&sha256).as_str(),
                            ComponentTypeRef::Module(type_index),
                        );
                        out.section(&imports);
                        modules.push(SharedModule { sha256, bytes });
                    }
                    None if shift.module == Some(index) => return Ok(None),
                    None => {
                        out.section(&RawSection {
                            id: wasm_encoder::ComponentSectionId::CoreModule as u8,
                            data: bytes,
                        });
                    }
                }
            }
            Payload::ComponentSection {
                unchecked_range, ..
            } => {
                // Its outer aliases could name modules a state split shifted
                // (wit-component's nested components alias only types).
                if shift.module.is_some()
                    && aliases_outer_modules(slice(component, unchecked_range))?
                {
                    return Ok(None);
                }
                depth += 1;
                copy(component, &payload, &mut out);
            }
            Payload::ComponentImportSection(reader) => {
                for import in reader.clone() {
                    if matches!(import?.ty, wasmparser::ComponentTypeRef::Module(_)) {
                        module_count += 1;
                    }
                }
                copy(component, &payload, &mut out);
            }
            Payload::ComponentAliasSection(reader) => {
                for alias in reader.clone() {
                    if matches!(
                        alias?,
                        ComponentAlias::InstanceExport {
                            kind: ComponentExternalKind::Module,
                            ..
                        } | ComponentAlias::Outer {
                            kind: ComponentOuterAliasKind::CoreModule,
                            ..
                        }
                    ) {
                        module_count += 1;
                    }
                }
                if !copy_shifted(component, &payload, &mut shift, &mut out) {
                    return Ok(None);
                }
            }
            Payload::ComponentExportSection(reader) => {
                for export in reader.clone() {
                    if export?.kind == ComponentExternalKind::Module {
                        module_count += 1;
                    }
                }
                if !copy_shifted(component, &payload, &mut shift, &mut out) {
                    return Ok(None);
                }
            }
            Payload::ComponentInstanceSection(_) => {
                if !copy_shifted(component, &payload, &mut shift, &mut out) {
                    return Ok(None);
                }
            }
            Payload::InstanceSection(reader) => {
                let Some(split_at) = shift.module else {
                    instance_count += reader.count();
                    copy(component, &payload, &mut out);
                    continue;
                };
                let mut section = wasm_encoder::InstanceSection::new();
                for instance in reader.clone() {
                    let instance = instance?;
                    let index = instance_count;
                    instance_count += 1;
                    let args = match &instance {
                        wasmparser::Instance::Instantiate { module_index, args }
                            if *module_index == split_at =>
                        {
                            args
                        }
                        _ => {
                            if shift.parse_instance(&mut section, instance).is_err() {
                                return Ok(None);
                            }
                            continue;
                        }
                    };
                    // Instantiated once only: the state, then the code with it.
                    if shift.instance.is_some() {
                        return Ok(None);
                    }
                    shift.instance = Some(index);
                    section.instantiate(split_at, Vec::<(&str, ModuleArg)>::new());
                    let mut with: Vec<(&str, ModuleArg)> = args
                        .iter()
                        .map(|arg| {
                            (
                                arg.name,
                                ModuleArg::Instance(shift.instance_index(arg.index)),
                            )
                        })
                        .collect();
                    with.push((STATE_MODULE, ModuleArg::Instance(index)));
                    section.instantiate(split_at + 1, with);
                }
                out.section(&section);
            }
            // Core modules and instances by their old indices: left out.
            Payload::CustomSection(custom)
                if shift.module.is_some() && custom.name() == "component-name" => {}
            Payload::End(_) => {}
            _ => copy(component, &payload, &mut out),
        }
    }
    if modules.is_empty() {
        return Ok(None);
    }
    Ok(Some(Split {
        component: out.finish(),
        modules,
    }))
}

/// Copies a section that may name core modules or instances (aliases,
/// exports, component instances) into `out`, through `shift` once a state
/// split has moved them; false when it cannot be re-encoded.
fn copy_shifted(
    component: &[u8],
    payload: &Payload<'_>,
    shift: &mut Shift,
    out: &mut wasm_encoder::Component,
) -> bool {
    fn reencode<S: wasm_encoder::ComponentSection + Default, E>(
        out: &mut wasm_encoder::Component,
        parse: impl FnOnce(&mut S) -> Result<(), E>,
    ) -> bool {
        let mut section = S::default();
        let parsed = parse(&mut section).is_ok();
        if parsed {
            out.section(&section);
        }
        parsed
    }
    if shift.module.is_none() {
        copy(component, payload, out);
        return true;
    }
    match payload {
        Payload::ComponentAliasSection(reader) => reencode(out, |section| {
            shift.parse_component_alias_section(section, reader.clone())
        }),
        Payload::ComponentExportSection(reader) => reencode(out, |section| {
            shift.parse_component_export_section(section, reader.clone())
        }),
        Payload::ComponentInstanceSection(reader) => reencode(out, |section| {
            shift.parse_component_instance_section(section, reader.clone())
        }),
        _ => {
            copy(component, payload, out);
            true
        }
    }
}

/// Whether a nested component (or one nested in it) aliases a core module
/// of an enclosing component.
fn aliases_outer_modules(nested: &[u8]) -> Result<bool, wasmparser::BinaryReaderError> {
    for payload in Parser::new(0).parse_all(nested) {
        if let Payload::ComponentAliasSection(reader) = payload? {
            for alias in reader {
                if let ComponentAlias::Outer {
                    kind: ComponentOuterAliasKind::CoreModule,
                    ..
                } = alias?
                {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// The indices a state split moves: it puts the state module where the
/// marked module was and the code's import after it, and instantiates the
/// state just before the code, so every later core module and core
/// instance is one further on.
#[derive(Default)]
struct Shift {
    /// The marked module's index in the original.
    module: Option<u32>,
    /// The index of its instance in the original.
    instance: Option<u32>,
}

impl Reencode for Shift {
    type Error = std::convert::Infallible;
}

impl ReencodeComponent for Shift {
    fn module_index(&mut self, index: u32) -> u32 {
        shifted(self.module, index)
    }

    fn instance_index(&mut self, index: u32) -> u32 {
        shifted(self.instance, index)
    }
}

fn shifted(from: Option<u32>, index: u32) -> u32 {
    match from {
        Some(from) if index >= from => index + 1,
        _ => index,
    }
}

fn slice<'a>(bytes: &'a [u8], range: &Range<usize>) -> &'a [u8] {
    bytes.get(range.clone()).unwrap_or_default()
}

fn copy(component: &[u8], payload: &Payload<'_>, out: &mut wasm_encoder::Component) {
    if let Some((id, range)) = payload.as_section() {
        out.section(&RawSection {
            id,
            data: slice(component, &range),
        });
    }
}

/// What the split needs to know of a core module.
struct Found {
    /// Its imports and exports, with the types they use.
    ty: ModuleType,
    /// The size of its code section.
    code: u32,
    defines_memory: bool,
}

/// Reads a core module's type, or `None` for a module this rewrite does not
/// describe.
fn module_type(module: &[u8]) -> Option<Found> {
    let mut reencoder = RoundtripReencoder;
    let mut ty = ModuleType::new();
    // The index spaces an export may name: imports first, then definitions.
    let mut funcs: Vec<u32> = Vec::new();
    let mut tables = Vec::new();
    let mut memories = Vec::new();
    let mut globals = Vec::new();
    let mut tags = Vec::new();
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut code = 0;
    let mut defines_memory = false;
    for payload in Parser::new(0).parse_all(module) {
        match payload.ok()? {
            Payload::CodeSectionStart { size, .. } => code = size,
            Payload::TypeSection(reader) => {
                for group in reader {
                    reencoder
                        .parse_recursive_type_group(ty.ty(), group.ok()?)
                        .ok()?;
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.ok()?;
                    match import.ty {
                        TypeRef::Func(index) | TypeRef::FuncExact(index) => funcs.push(index),
                        TypeRef::Table(t) => tables.push(reencoder.table_type(t).ok()?),
                        TypeRef::Memory(m) => memories.push(reencoder.memory_type(m).ok()?),
                        TypeRef::Global(g) => globals.push(reencoder.global_type(g).ok()?),
                        TypeRef::Tag(t) => tags.push(reencoder.tag_type(t).ok()?),
                    }
                    let entity = reencoder.entity_type(import.ty).ok()?;
                    imports.push((import.module.to_string(), import.name.to_string(), entity));
                }
            }
            Payload::FunctionSection(reader) => {
                for index in reader {
                    funcs.push(index.ok()?);
                }
            }
            Payload::TableSection(reader) => {
                for table in reader {
                    tables.push(reencoder.table_type(table.ok()?.ty).ok()?);
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    defines_memory = true;
                    memories.push(reencoder.memory_type(memory.ok()?).ok()?);
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    globals.push(reencoder.global_type(global.ok()?.ty).ok()?);
                }
            }
            Payload::TagSection(reader) => {
                for tag in reader {
                    tags.push(reencoder.tag_type(tag.ok()?).ok()?);
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.ok()?;
                    let index = usize::try_from(export.index).ok()?;
                    let entity = match export.kind {
                        ExternalKind::Func | ExternalKind::FuncExact => {
                            EntityType::Function(*funcs.get(index)?)
                        }
                        ExternalKind::Table => EntityType::Table(*tables.get(index)?),
                        ExternalKind::Memory => EntityType::Memory(*memories.get(index)?),
                        ExternalKind::Global => EntityType::Global(*globals.get(index)?),
                        ExternalKind::Tag => EntityType::Tag(*tags.get(index)?),
                    };
                    exports.push((export.name.to_string(), entity));
                }
            }
            _ => {}
        }
    }
    for (module, name, entity) in imports {
        ty.import(&module, &name, entity);
    }
    for (name, entity) in exports {
        ty.export(&name, entity);
    }
    Some(Found {
        ty,
        code,
        defines_memory,
    })
}
