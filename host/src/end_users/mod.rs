//! End users, the third principal: the people a frontend serves (issue 27).
//! `jwks` verifies their JWTs against their app's identity provider.

pub(crate) mod jwks;
