//! Consistent hashing (ketama), placed as twemproxy places keys. (being written)
