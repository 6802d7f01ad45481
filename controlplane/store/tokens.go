package store

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Agent tokens and the catalog in force (see the key list in doc.go).

func tokenKey(id string) []byte        { return []byte("t/" + id) }
func tokenHashKey(sum string) []byte   { return []byte("h/" + sum) }
func catalogSourceKey(v string) []byte { return []byte("k/" + v) }

var catalogKey = []byte("m/catalog")

// Token returns an agent token as this update sees it, or ErrNotFound.
func (t *Tx) Token(id string) (*recordv1.AgentToken, error) {
	return decodeToken(t.get(tokenKey(id)))
}

// TokenByHash returns the token whose SHA-256 is sum, or ErrNotFound.
func (t *Tx) TokenByHash(sum string) (*recordv1.AgentToken, error) {
	id, err := t.get(tokenHashKey(sum))
	if err != nil {
		return nil, err
	}
	return t.Token(string(id))
}

// PutToken stores a token and its hash index. A token's hash never changes:
// a record whose id is stored under another hash is refused.
func (t *Tx) PutToken(x *recordv1.AgentToken) error {
	if x.GetId() == "" || x.GetSha256() == "" {
		return errors.New("store: token without id or hash")
	}
	if id, err := t.get(tokenHashKey(x.GetSha256())); err == nil && string(id) != x.GetId() {
		return fmt.Errorf("store: token hash already belongs to %s", id)
	}
	data, err := proto.Marshal(x)
	if err != nil {
		return fmt.Errorf("store: encode token: %w", err)
	}
	t.set(tokenKey(x.GetId()), data)
	t.set(tokenHashKey(x.GetSha256()), []byte(x.GetId()))
	return nil
}

// Catalog returns the catalog version last recorded, or ErrNotFound.
func (t *Tx) Catalog() (*recordv1.CatalogVersion, error) {
	return decodeCatalog(t.get(catalogKey))
}

// PutCatalog records the catalog version in force and keeps its source
// bytes under its version, so the contract an execution was accepted under
// (Execution.catalog_version) can be read back.
func (t *Tx) PutCatalog(c *recordv1.CatalogVersion, source []byte) error {
	data, err := proto.Marshal(c)
	if err != nil {
		return fmt.Errorf("store: encode catalog version: %w", err)
	}
	t.set(catalogKey, data)
	if source != nil {
		t.set(catalogSourceKey(c.GetVersion()), append([]byte(nil), source...))
	}
	return nil
}

// Token returns a committed token, or ErrNotFound.
func (s *Store) Token(id string) (*recordv1.AgentToken, error) {
	return decodeToken(s.kv.Get(tokenKey(id)))
}

// TokenByHash returns the committed token whose SHA-256 is sum, or ErrNotFound.
func (s *Store) TokenByHash(sum string) (*recordv1.AgentToken, error) {
	id, err := s.kv.Get(tokenHashKey(sum))
	if err != nil {
		return nil, err
	}
	return s.Token(string(id))
}

// Tokens returns every stored token (revoked ones too), in id order.
func (s *Store) Tokens() ([]*recordv1.AgentToken, error) {
	return scanDecoded(s.kv, "t/", decodeToken)
}

// Catalog returns the committed catalog version, or ErrNotFound.
func (s *Store) Catalog() (*recordv1.CatalogVersion, error) {
	return decodeCatalog(s.kv.Get(catalogKey))
}

// CatalogSource returns the source bytes of a catalog version, or ErrNotFound.
func (s *Store) CatalogSource(version string) ([]byte, error) {
	return s.kv.Get(catalogSourceKey(version))
}

func decodeToken(data []byte, err error) (*recordv1.AgentToken, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.AgentToken{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode token: %w", err)
	}
	return x, nil
}

func decodeCatalog(data []byte, err error) (*recordv1.CatalogVersion, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.CatalogVersion{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode catalog version: %w", err)
	}
	return x, nil
}
