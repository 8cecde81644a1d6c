//! Splitting a marked core module that defines its memory into its code and
//! its state: the code (functions, tables, elements, exports) imports its
//! memory and globals from a small state module that defines them (the
//! memory's type, the globals' values, the data). Builds that differ only in
//! their state, as every build of a TypeScript agent over one engine does
//! (the snapshot is the state), then share one compiled code module
//! (`runtime::compile::split`, `runtime::compile::shared_modules`).
//!
//! Only a module that carries the marker section ([`MARKER`], written by
//! `agenthost build` where the code is the same for every build of a base)
//! is split: a Rust agent's code changes with every build, so sharing it
//! would only pile up compiled modules. Passive data segments (wizer keeps a
//! module's own, emptied, ahead of the snapshot's active ones) stay with the
//! code, so its data indices hold. A module of another shape (memories or
//! globals imported, more than one memory, a passive segment after an active
//! one, initialisers that are not constants) is left whole.

use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasm_encoder::{DataSection, EntityType, ExportKind, ExportSection, ImportSection, RawSection};
use wasmparser::{DataKind, Operator, Parser, Payload, TypeRef};

/// The custom section that marks a module whose code every build shares.
pub(crate) const MARKER: &str = "agenthost:shared-code";

/// The module name under which the code imports its state.
pub(crate) const STATE_MODULE: &str = "agenthost-state";

/// The two halves of a marked module.
pub(crate) struct CodeAndState {
    /// The functions, importing their memory and globals from [`STATE_MODULE`].
    pub code: Vec<u8>,
    /// The memory, the globals and the data, exported for `code`.
    pub state: Vec<u8>,
}

/// Splits `module` into code and state, or `None` for a module without the
/// [`MARKER`], a shape this split leaves whole, or bytes that do not parse
/// (the compile reports those).
pub(crate) fn split(module: &[u8]) -> Option<CodeAndState> {
    let mut reencoder = RoundtripReencoder;
    let mut memory = None;
    let mut globals = Vec::new();
    let mut state_sections: Vec<(u8, &[u8])> = Vec::new();
    let (mut passive, mut active) = (Vec::new(), Vec::new());
    let mut marked = false;
    // First pass: the state, and whether this module can be split.
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.ok()?;
        let section = payload.as_section();
        match payload {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if matches!(import.ok()?.ty, TypeRef::Memory(_) | TypeRef::Global(_)) {
                        return None;
                    }
                }
            }
            Payload::MemorySection(reader) => {
                let mut memories = reader.clone().into_iter();
                memory = Some(reencoder.memory_type(memories.next()?.ok()?).ok()?);
                if memories.next().is_some() {
                    return None;
                }
                state_sections.push(section_bytes(module, section)?);
            }
            Payload::GlobalSection(reader) => {
                for global in reader.clone() {
                    let global = global.ok()?;
                    if !constant(global.init_expr.get_operators_reader()) {
                        return None;
                    }
                    globals.push(reencoder.global_type(global.ty).ok()?);
                }
                state_sections.push(section_bytes(module, section)?);
            }
            Payload::DataSection(reader) => {
                // Wizer keeps the engine's passive segments (emptied, so the
                // code's data indices still hold) before the snapshot's
                // active ones: the code keeps the former, the state the latter.
                for data in reader {
                    let data = data.ok()?;
                    match data.kind {
                        DataKind::Passive if active.is_empty() => passive.push(data.data),
                        DataKind::Active {
                            memory_index: 0,
                            offset_expr,
                        } if constant(offset_expr.get_operators_reader()) => {
                            let offset = reencoder.const_expr(offset_expr).ok()?;
                            active.push((offset, data.data));
                        }
                        _ => return None,
                    }
                }
            }
            Payload::CustomSection(custom) if custom.name() == MARKER => marked = true,
            _ => {}
        }
    }
    if !marked {
        return None;
    }
    let memory = memory?;

    // The state: memory, globals, their exports, the active data.
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    for index in 0..globals.len() {
        exports.export(
            &global_name(index),
            ExportKind::Global,
            u32::try_from(index).ok()?,
        );
    }
    let mut state = wasm_encoder::Module::new();
    for (id, data) in &state_sections {
        state.section(&RawSection { id: *id, data });
    }
    state.section(&exports);
    let mut data = DataSection::new();
    for (offset, bytes) in active {
        data.active(0, &offset, bytes.iter().copied());
    }
    state.section(&data);

    // The code: every section but the state's and the marker, with the
    // memory and the globals added to its imports (after the functions it
    // imports, so no index moves: it imported no memory and no global).
    let mut extra = vec![("memory".to_string(), EntityType::Memory(memory))];
    for (index, ty) in globals.into_iter().enumerate() {
        extra.push((global_name(index), EntityType::Global(ty)));
    }
    let import_state = |imports: &mut ImportSection| {
        for (name, ty) in &extra {
            imports.import(STATE_MODULE, name, *ty);
        }
    };
    let mut code = wasm_encoder::Module::new();
    let mut imported = false;
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.ok()?;
        let Some((id, range)) = payload.as_section() else {
            continue;
        };
        let is = |section: wasm_encoder::SectionId| id == section as u8;
        if is(wasm_encoder::SectionId::Memory)
            || is(wasm_encoder::SectionId::Global)
            || matches!(&payload, Payload::CustomSection(s) if s.name() == MARKER)
        {
            continue;
        }
        if is(wasm_encoder::SectionId::DataCount) || is(wasm_encoder::SectionId::Data) {
            if !passive.is_empty() && is(wasm_encoder::SectionId::DataCount) {
                let count = u32::try_from(passive.len()).ok()?;
                code.section(&wasm_encoder::DataCountSection { count });
            }
            if !passive.is_empty() && is(wasm_encoder::SectionId::Data) {
                let mut data = DataSection::new();
                for bytes in &passive {
                    data.passive(bytes.iter().copied());
                }
                code.section(&data);
            }
            continue;
        }
        if let Payload::ImportSection(reader) = &payload {
            let mut imports = ImportSection::new();
            for import in reader.clone().into_imports() {
                let import = import.ok()?;
                let ty = reencoder.entity_type(import.ty).ok()?;
                imports.import(import.module, import.name, ty);
            }
            import_state(&mut imports);
            code.section(&imports);
            imported = true;
            continue;
        }
        // A module without imports: its import section goes before the
        // first section that must follow one.
        let custom_or_type = id == 0 || is(wasm_encoder::SectionId::Type);
        if !imported && !custom_or_type {
            let mut imports = ImportSection::new();
            import_state(&mut imports);
            code.section(&imports);
            imported = true;
        }
        code.section(&RawSection {
            id,
            data: section_bytes(module, Some((id, range)))?.1,
        });
    }
    Some(CodeAndState {
        code: code.finish(),
        state: state.finish(),
    })
}

/// The export name of the state's global `index`.
fn global_name(index: usize) -> String {
    format!("global{index}")
}

/// Whether a constant expression uses only constants (no `global.get`, no
/// references): the state module has nothing else to give it.
fn constant(reader: wasmparser::OperatorsReader<'_>) -> bool {
    reader.into_iter().all(|op| {
        matches!(
            op,
            Ok(Operator::I32Const { .. }
                | Operator::I64Const { .. }
                | Operator::F32Const { .. }
                | Operator::F64Const { .. }
                | Operator::V128Const { .. }
                | Operator::End)
        )
    })
}

/// The id and the contents of a section of `module`.
fn section_bytes(
    module: &[u8],
    section: Option<(u8, std::ops::Range<usize>)>,
) -> Option<(u8, &[u8])> {
    let (id, range) = section?;
    Some((id, module.get(range)?))
}
