package tokens

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/actorname"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// MigratedSuffix is appended to a tokens.json once its tokens are in the store.
const MigratedSuffix = ".migrated"

// legacyFile is the tokens.json format of earlier versions (mcpfront/auth):
//
//	{"tokens": [{"id": "tok_…", "actor": "alice", "sha256": "<hex>", "created_at": "<RFC 3339>"}]}
type legacyFile struct {
	Tokens []struct {
		ID        string    `json:"id"`
		Actor     string    `json:"actor"`
		SHA256    string    `json:"sha256"`
		CreatedAt time.Time `json:"created_at"`
	} `json:"tokens"`
}

// Migrate imports the tokens of a tokens.json at path into the store (hashes
// as they are: the tokens agents hold keep working), journals token_migrated
// for each, then renames the file to path + MigratedSuffix. A missing file
// is nothing to do. Tokens already in the store are skipped, so a crash
// between the commit and the rename only repeats the rename. It returns how
// many tokens it imported.
func (s *Service) Migrate(ctx context.Context, path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tokens: reading %s: %w", path, err)
	}
	var f legacyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return 0, fmt.Errorf("%w: %s: %v (fix or move it away; its tokens are not imported until then)", ErrBadFile, path, err)
	}
	for i, t := range f.Tokens {
		if _, err := hex.DecodeString(t.SHA256); err != nil || len(t.SHA256) != 64 {
			return 0, fmt.Errorf("%w: %s: token %d (id %q) has a bad sha256", ErrBadFile, path, i, t.ID)
		}
		if err := actorname.CheckIssued(t.Actor); err != nil {
			return 0, fmt.Errorf("%w: %s: token %d (id %q) has a bad actor: %w", ErrBadFile, path, i, t.ID, err)
		}
	}
	now := s.clock().UTC().Truncate(time.Second)
	n := 0
	var made []string
	err = s.st.Update(ctx, func(tx *store.Tx) error {
		n, made = 0, made[:0]
		for _, lt := range f.Tokens {
			if _, err := tx.TokenByHash(lt.SHA256); err == nil {
				continue
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			t := &recordv1.AgentToken{Id: idOf(lt.SHA256), Actor: lt.Actor, Sha256: lt.SHA256, Origin: OriginTokensJSON, CreatedAt: timestamppb.New(now)}
			if !lt.CreatedAt.IsZero() {
				t.CreatedAt = timestamppb.New(lt.CreatedAt.UTC())
			}
			if err := tx.PutToken(t); err != nil {
				return err
			}
			if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: KindMigrated, Actor: t.GetActor(), Reason: "token " + t.GetId() + " imported from " + path, Token: store.JournaledToken(t)}); err != nil {
				return err
			}
			n++
			made = append(made, t.GetId())
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, id := range made {
		s.cleared.Store(id, struct{}{})
	}
	if err := os.Rename(path, path+MigratedSuffix); err != nil {
		return n, fmt.Errorf("tokens: %d token(s) of %s are in the store, but renaming it failed: %w (rename it by hand)", n, path, err)
	}
	s.log.Info("tokens.json migrated into the store", "path", path, "tokens", n, "renamed_to", path+MigratedSuffix)
	return n, nil
}
