//! Small helpers shared across modules.

/// Truncates `s` to at most `max` bytes, on a character boundary.
pub fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
}

#[cfg(test)]
mod tests {
    #[test]
    fn truncates_on_a_char_boundary() {
        let mut s = "héllo".to_string();
        super::truncate_utf8(&mut s, 2);
        assert_eq!(s, "h");
        let mut s = "abc".to_string();
        super::truncate_utf8(&mut s, 10);
        assert_eq!(s, "abc");
    }
}
