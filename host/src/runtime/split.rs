//! Splitting a component's large libraries out as imports: the component
//! keeps its own modules and imports each library module (one with much
//! code that imports its memory) by content (`agenthost-shared-m<sha-256>`),
//! so what many builds share (a Python agent's interpreter, its libc) is
//! compiled once (`runtime::shared_modules`) and a redeploy compiles only
//! what changed.
//!
//! The rewrite keeps every index space: an imported core module takes the
//! index of the module it replaces, and its type goes into a new core type
//! section, which is why components that define core types of their own are
//! left whole. Nested components are copied as they are.

use std::ops::Range;

use sha2::{Digest, Sha256};
use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasm_encoder::{
    ComponentCoreTypeEncoder, ComponentImportSection, ComponentTypeRef, CoreTypeSection,
    EntityType, ModuleType, RawSection,
};
use wasmparser::{ExternalKind, Parser, Payload, TypeRef};

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
    pub bytes: &'a [u8],
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
                // Shared: the libraries of a dynamically linked program (they
                // import their memory). A module that defines its memory holds
                // the program's own data (a Python agent's snapshot, a Rust
                // agent whole) and is different in every build.
                let ty = match module_type(bytes) {
                    Some(found) if !found.defines_memory && found.code >= MIN_SHARED_CODE_BYTES => {
                        Some(found.ty)
                    }
                    _ => None,
                };
                let shared = ty.map(|ty| (ty, hex::encode(Sha256::digest(bytes))));
                // A module twice in one component would import one name twice.
                match shared.filter(|(_, sha)| !modules.iter().any(|m| &m.sha256 == sha)) {
                    Some((ty, sha256)) => {
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
                    None => {
                        out.section(&RawSection {
                            id: wasm_encoder::ComponentSectionId::CoreModule as u8,
                            data: bytes,
                        });
                    }
                }
            }
            Payload::ComponentSection { .. } => {
                depth += 1;
                copy(component, &payload, &mut out);
            }
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

fn slice<'a>(bytes: &'a [u8], range: &Range<u64>) -> &'a [u8] {
    let start = usize::try_from(range.start).unwrap_or(usize::MAX);
    let end = usize::try_from(range.end).unwrap_or(usize::MAX);
    bytes.get(start..end).unwrap_or_default()
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
