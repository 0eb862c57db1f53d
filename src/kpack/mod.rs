//! kpack's own formats: the `.rocm_kpack_ref` marker (and, later, `.kpack` archives).

pub mod marker;

pub use marker::Marker;
