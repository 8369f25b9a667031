-- Identities from JWT logins: the (iss, sub) pair of a token maps to one user,
-- created or linked by email on the first login.
CREATE TABLE user_identities (
  issuer      VARCHAR(255) NOT NULL,
  subject     VARCHAR(255) NOT NULL,
  user_id     VARCHAR(32)  NOT NULL,
  created_at  DATETIME(3)  NOT NULL,
  PRIMARY KEY (issuer, subject),
  KEY user_identities_user (user_id),
  CONSTRAINT user_identities_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
