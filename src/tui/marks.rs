//! What a mark in the Kernels view is (the marks and their prompt are
//! [`super::kernelmarks`]).

use kpack::kernels::{CodeObjectRef, KernelRow};
use std::collections::BTreeSet;

/// A marked kernel: its code object and its (mangled) name.
pub type KernelMark = (CodeObjectRef, String);

/// The extract prompt: the code objects, the directory being typed, the cursor.
pub type ExtractPrompt = (BTreeSet<CodeObjectRef>, String, usize);

/// How a row is marked.
pub fn mark_of(r: &KernelRow) -> KernelMark {
    (r.code_object(), r.kernel.name.clone())
}
